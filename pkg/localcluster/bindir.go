package localcluster

import (
	"os"
	"path/filepath"

	"github.com/pkg/errors"
)

// BinDirEnv names the directory holding the control-plane binaries. It is the variable envtest
// already reads, so one setting serves controller-runtime's envtest and kdag's local cluster.
const BinDirEnv = "KUBEBUILDER_ASSETS"

// relDir is where `make tools-cluster` puts the binaries, relative to the repository root.
const relDir = "bin/cluster"

// BinDir returns the directory holding the control-plane binaries that the local cluster and
// envtest run: $KUBEBUILDER_ASSETS when it is
// set, else the first bin/cluster found walking up from the working directory (so `go test` in
// any package of the repository works once `make tools-cluster` has run).
//
// It returns an error when neither exists or when the directory lacks one of the binaries named in
// required; the message says how to build them.
func BinDir(required ...string) (string, error) {
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		dir = findUp(relDir)
	}
	if dir == "" {
		return "", errors.Errorf("control-plane binaries not found: set %s or run `make tools-cluster` "+
			"in the repository (it builds them into %s)", BinDirEnv, relDir)
	}
	for _, name := range required {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", errors.Wrapf(err, "control-plane binary %s missing in %s: run `make tools-cluster`", name, dir)
		}
	}
	return dir, nil
}

// findUp returns the absolute path of rel in the working directory or its nearest ancestor that
// has it, or "" when none does.
func findUp(rel string) string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		candidate := filepath.Join(dir, rel)
		if st, err := os.Stat(candidate); err == nil && st.IsDir() {
			return candidate
		}
		if parent := filepath.Dir(dir); parent == dir {
			return ""
		}
	}
}
