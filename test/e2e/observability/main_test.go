// Package observability checks, end to end, what an operator built on kdag tells its operators:
// the reference operator reconciles the sample Gitea on the local cluster (pkg/testing/cluster)
// with its traces exported over OTLP to a real Jaeger (in-memory storage, every port on loopback)
// and its metrics served by the manager, and the tests read both back the way a user would: Jaeger's
// query API and the Prometheus endpoint.
//
// The Jaeger binary comes from `make test` (bin/jaeger-<version>/jaeger). Without it the trace test
// fails; KDAG_SKIP_JAEGER=1 skips it (the rest then runs with tracing off).
package observability

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/cluster"
	"github.com/kdag-dev/kdag/test/internal/refop"
)

// clusterName is this package's local cluster, apart from the other e2e packages' so that they can
// run in parallel.
const clusterName = "kdag-e2e-obs"

var (
	// repoRoot is the repository's root directory (CRDs, samples, the Jaeger config and binary).
	repoRoot string
	local    *cluster.Cluster
	// scheme is what the manager serves: client-go's types and the Gitea API.
	scheme = runtime.NewScheme()
	// cl is an uninstrumented client for the tests' own reads and writes.
	cl client.Client
	// jaegerInstance is the Jaeger the tests export to; nil when jaegerErr says why there is none.
	jaegerInstance *jaeger
	jaegerErr      error
)

func TestMain(m *testing.M) {
	// OpenTelemetry's default global provider delegates, once and for good, to the first provider
	// set: a tracer taken before then would keep the first test's (shut down) provider. A no-op
	// provider set first makes every test's Setup count.
	otel.SetTracerProvider(noop.NewTracerProvider())
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(giteav1alpha1.AddToScheme(scheme))
	os.Exit(mainCode(m))
}

// mainCode starts the cluster and Jaeger, runs the tests and stops both; it returns the exit code.
func mainCode(m *testing.M) int {
	ctx := context.Background()
	var err error
	if repoRoot, err = findRepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return cluster.Main(cluster.Options{Name: clusterName, Log: os.Stderr}, func(c *cluster.Cluster) int {
		local = c
		var err error
		if cl, err = client.New(local.Config, client.Options{Scheme: scheme}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := refop.InstallCRDs(local); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		jaegerInstance, jaegerErr = startJaeger(ctx)
		if jaegerInstance != nil {
			defer func() {
				if err := jaegerInstance.stop(); err != nil {
					fmt.Fprintln(os.Stderr, err)
				}
			}()
		}
		return m.Run()
	})
}

// findRepoRoot returns the directory holding kdag's go.mod, walking up from the package directory.
func findRepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/kdag-dev/kdag\n")) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no kdag go.mod above %s", wd)
		}
	}
}

// yamlDocuments splits a YAML file into its documents, dropping empty ones.
func yamlDocuments(path string) ([][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			obj := map[string]any{}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if len(obj) > 0 { // not only comments
				docs = append(docs, doc)
			}
		}
	}
}
