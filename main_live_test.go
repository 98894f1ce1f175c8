package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/plan"
	"github.com/kdag-dev/kdag/pkg/testing/envtest"
)

// api is an API server with the operator's CRDs, started by the first test that needs it.
var api = controllertest.NewAPIServer(envtest.Options{CRDDirectoryPaths: []string{"config/crd/bases"}}, giteav1alpha1.AddToScheme)

func TestMain(m *testing.M) { api.Main(m) }

// TestRunPlan_Live plans the sample against an API server as `kdag plan --live` does, through a
// kubeconfig: first from the file (the Gitea is not on the cluster: everything is created, its
// children planned as new owners), then the Gitea created on the cluster by its TYPE/NAME
// (issue 14).
func TestRunPlan_Live(t *testing.T) {
	env := api.Env(t)
	ns := "plan-live"
	if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, env)
	var out bytes.Buffer
	err := runPlan([]string{"--live", "-f", "config/samples/gitea.yaml", "--kubeconfig", kubeconfig, "-n", ns}, &out)
	if !errors.Is(err, plan.ErrChanges) {
		t.Fatalf("plan --live -f = %v, want ErrChanges\n%s", err, out.String())
	}
	for _, want := range []string{
		"Gitea plan-live/demo  (not on the cluster)\n  Create     PostgreSQL plan-live/demo-postgresql\n",
		"PostgreSQL plan-live/demo-postgresql  (not on the cluster)\n", "Create     StatefulSet plan-live/demo-postgresql\n",
		"GiteaServer plan-live/demo  (not on the cluster)\n", "Create     Deployment plan-live/demo\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	gitea := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"}}
	if err := env.Client.Create(t.Context(), gitea); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = runPlan([]string{"--live", "gitea/demo", "--kubeconfig", kubeconfig, "-n", ns, "-o", "json"}, &out)
	if !errors.Is(err, plan.ErrChanges) {
		t.Fatalf("plan --live gitea/demo = %v, want ErrChanges\n%s", err, out.String())
	}
	if want := "\"owner\": \"Gitea plan-live/demo\",\n    \"exists\": true,"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}

// writeKubeconfig writes a kubeconfig that reaches env's API server as its admin.
func writeKubeconfig(t *testing.T, env *envtest.Environment) string {
	t.Helper()
	cfg := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}
