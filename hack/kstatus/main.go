// kstatus reads Kubernetes objects as JSON, one per line on stdin, and writes for each the
// status kstatus computes for it (sigs.k8s.io/cli-utils/pkg/kstatus, the library Flux,
// Helm 4's --wait and kpt use), one JSON line each: {"status": ..., "message": ...} or
// {"error": ...}. The tests run it as a coprocess against live DecisionModels (issue 38).
package main

import (
	"bufio"
	"encoding/json"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type answer struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func compute(line []byte) answer {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(line); err != nil {
		return answer{Error: err.Error()}
	}
	found, err := status.Compute(obj)
	if err != nil {
		return answer{Error: err.Error()}
	}
	return answer{Status: found.Status.String(), Message: found.Message}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		if err := enc.Encode(compute(in.Bytes())); err != nil {
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
}
