package localcluster

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TestRestConfig_NoClientSideRateLimit: the local cluster's rest.Config reaches the API server
// as ctrl.GetConfig's does, without client-go's default limit of 5 requests a second per client.
func TestRestConfig_NoClientSideRateLimit(t *testing.T) {
	kc := []byte(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: not-a-secret
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
`)
	cfg, err := restConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("host %q, want the kubeconfig's server", cfg.Host)
	}
	if cfg.QPS >= 0 || cfg.RateLimiter != nil {
		t.Errorf("QPS %v, rate limiter %v: want QPS < 0, no client-side rate limit", cfg.QPS, cfg.RateLimiter)
	}
	core := rest.CopyConfig(cfg)
	core.APIPath, core.GroupVersion = "/api", &schema.GroupVersion{Version: "v1"}
	core.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(core)
	if err != nil {
		t.Fatal(err)
	}
	if rl := rc.GetRateLimiter(); rl != nil {
		t.Errorf("a client of the config has rate limiter %T, want none", rl)
	}
	if _, err := restConfig([]byte("not: [a kubeconfig")); err == nil {
		t.Error("restConfig of a malformed kubeconfig returned no error")
	}
}
