package gitea

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
)

// ReportStatus implements controller.StatusReporter: the deployed version and the URL, from the
// GiteaServer child's status.
func (ResourceManager) ReportStatus(_ context.Context, g *giteav1alpha1.Gitea, report controller.Report) error {
	return reportStatus(g, report.Ready, report)
}

// graph is what reportStatus reads of a controller.Report: a node's object.
type graph interface {
	Get(obj client.Object) (bool, error)
}

// reportStatus sets g's own status from the graph of a reconcile (ready: every node Ready): the
// server's URL as soon as it has one, its version once everything is ready.
func reportStatus(g *giteav1alpha1.Gitea, ready bool, gr graph) error {
	server := &giteav1alpha1.GiteaServer{ObjectMeta: metav1.ObjectMeta{Namespace: g.Namespace, Name: serverName(g)}}
	found, err := gr.Get(server)
	if err != nil || !found {
		return err
	}
	if server.Status.URL != "" {
		g.Status.URL = server.Status.URL
	}
	if ready {
		g.Status.Version = server.Status.Version
	}
	return nil
}
