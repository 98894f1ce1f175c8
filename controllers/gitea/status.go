package gitea

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

type outputs struct {
	Version string `json:"version,omitempty"`
	URL     string `json:"url,omitempty"`
}

// ReportStatus implements controller.StatusReporter: the deployed version and the URL, from the
// GiteaServer child's status.
func (ResourceManager) ReportStatus(_ context.Context, owner client.Object, report controller.Report) (any, error) {
	g := owner.(*giteav1alpha1.Gitea)
	out := &outputs{Version: g.Status.Version, URL: g.Status.URL}
	if n := report.Node(giteav1alpha1.GiteaServerKind, serverName(g)); n != nil && n.Object != nil {
		if url, _, _ := unstructured.NestedString(n.Object.Object, "status", "url"); url != "" {
			out.URL = url
		}
		if report.Ready {
			out.Version, _, _ = unstructured.NestedString(n.Object.Object, "status", "version")
		}
	}
	return out, nil
}
