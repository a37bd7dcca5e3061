"""The ``dmrollout`` command line (and ``kubectl dm``): the parser and entry points (``main``),
the long-running commands (``commands``), the read verbs (``verbs``), the verbs that act
(``verbs_act``), the report (``verbs_report``), and how a command connects, prints and fails."""
