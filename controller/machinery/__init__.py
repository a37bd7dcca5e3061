"""The controller's machinery, apart from its domain (issue 37, item 1): the watch-fed object
cache, the workqueue, the watches that feed them, and leader election on a Lease. Used by the
reconciler and the hub's pipeline controller; knows nothing of rollouts."""
