package gitea

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controllertest"
)

func TestReportStatus(t *testing.T) {
	server := func() *giteav1alpha1.GiteaServer {
		s := &giteav1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "demo"}}
		s.Status.Version, s.Status.URL = "1.27.4", "http://demo-http.default.svc:3000/"
		return s
	}
	for _, tc := range []struct {
		name        string
		ready       bool
		graph       *controllertest.Graph
		wantVersion string
		wantURL     string
	}{
		{
			name: "ready: the server's version and URL", ready: true,
			graph:       controllertest.NewGraph(t, scheme).With(server(), kdagv1alpha1.NodeReady),
			wantVersion: "1.27.4", wantURL: "http://demo-http.default.svc:3000/",
		},
		{
			// During an upgrade the server's status already says the new version only once it is
			// Ready; until the whole graph is, the Gitea keeps the version it had.
			name:        "not ready: URL follows, version kept",
			graph:       controllertest.NewGraph(t, scheme).With(server(), kdagv1alpha1.NodeWaiting),
			wantVersion: "1.27.3", wantURL: "http://demo-http.default.svc:3000/",
		},
		{
			name:        "server not created yet: previous status kept",
			graph:       controllertest.NewGraph(t, scheme).WithoutObject(server(), kdagv1alpha1.NodeBlocked),
			wantVersion: "1.27.3", wantURL: "http://old/",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := defaulted()
			g.Status.Version, g.Status.URL = "1.27.3", "http://old/"
			if err := reportStatus(g, tc.ready, tc.graph); err != nil {
				t.Fatal(err)
			}
			if g.Status.Version != tc.wantVersion || g.Status.URL != tc.wantURL {
				t.Errorf("status version %q url %q, want %q, %q", g.Status.Version, g.Status.URL, tc.wantVersion, tc.wantURL)
			}
		})
	}
}
