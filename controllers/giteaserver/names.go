package giteaserver

import (
	"fmt"
	"strings"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// HTTPPort is the port Gitea serves HTTP on.
const HTTPPort = 3000

// ServiceName is the name of the HTTP Service of the GiteaServer named name: its output.
func ServiceName(name string) string { return name + "-http" }

// URL is the in-cluster URL of the GiteaServer, or its ingress URL when it has one.
func URL(s *giteav1alpha1.GiteaServer) string {
	if ing := s.Spec.Ingress; ing != nil {
		if ing.TLSSecretName != "" {
			return "https://" + ing.Host + "/"
		}
		return "http://" + ing.Host + "/"
	}
	return fmt.Sprintf("http://%s.%s.svc:%d/", ServiceName(s.Name), s.Namespace, HTTPPort)
}

// MigrationJobName is the name of the migration Job of version: one Job per version, so a new
// version runs a new migration and the previous Job is pruned once the new one is in the graph.
func MigrationJobName(name, version string) string {
	return name + "-migrate-" + strings.ReplaceAll(version, ".", "-")
}

func generatedSecretName(name string) string { return name + "-secrets" }
func configMapName(name string) string       { return name + "-config" }
func dataClaimName(name string) string       { return name + "-data" }

func labels(s *giteav1alpha1.GiteaServer) map[string]string {
	return common.Labels("gitea", s.Name, "server")
}
