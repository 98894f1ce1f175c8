package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBinDir(t *testing.T) {
	withBinary := t.TempDir()
	if err := os.WriteFile(filepath.Join(withBinary, "kube-apiserver"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	if err := os.MkdirAll(filepath.Join(repo, "bin", "cluster"), 0o755); err != nil {
		t.Fatal(err)
	}
	nested := filepath.Join(repo, "pkg", "deep")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      string
		wd       string
		required []string
		want     string
		wantErr  string
	}{
		{name: "env var wins", env: withBinary, wd: nested, required: []string{"kube-apiserver"}, want: withBinary},
		{name: "env var missing binary", env: withBinary, wd: nested, required: []string{"etcd"}, wantErr: "etcd missing"},
		{name: "found walking up", wd: nested, want: filepath.Join(repo, "bin", "cluster")},
		{name: "nowhere", wd: t.TempDir(), wantErr: "make tools-cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(BinDirEnv, tt.env)
			t.Chdir(tt.wd)
			got, err := BinDir(tt.required...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("BinDir() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("BinDir() error = %v", err)
			}
			if got != tt.want {
				t.Fatalf("BinDir() = %q, want %q", got, tt.want)
			}
		})
	}
}
