package giteaserver

import (
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
)

// configMap renders app.ini without secrets: database credentials and Gitea's keys reach the
// server as GITEA__section__KEY environment variables from Secrets.
func configMap(s *giteav1alpha1.GiteaServer) *corev1.ConfigMap {
	root := URL(s)
	u, _ := url.Parse(root)
	var ini strings.Builder
	section := func(name string, kv ...string) {
		fmt.Fprintf(&ini, "[%s]\n", name)
		for i := 0; i+1 < len(kv); i += 2 {
			fmt.Fprintf(&ini, "%s = %s\n", kv[i], kv[i+1])
		}
		ini.WriteString("\n")
	}
	ini.WriteString("APP_NAME = Gitea\nRUN_MODE = prod\n\n")
	section("server", "ROOT_URL", root, "DOMAIN", u.Hostname(), "HTTP_PORT", fmt.Sprint(HTTPPort),
		"APP_DATA_PATH", "/var/lib/gitea", "DISABLE_SSH", "true", "OFFLINE_MODE", "true")
	section("database", "DB_TYPE", "postgres", "SSL_MODE", "disable", "LOG_SQL", "false")
	section("repository", "ROOT", "/var/lib/gitea/git/repositories")
	section("security", "INSTALL_LOCK", "true")
	if s.Spec.Admin != nil {
		// The administrator comes from the admin Job. Without one, the first user to register
		// becomes the administrator (spec.admin), so registration stays open.
		section("service", "DISABLE_REGISTRATION", "true")
	}
	section("log", "MODE", "console", "LEVEL", "info")
	if c := s.Spec.Cache; c != nil {
		section("cache", "ADAPTER", "redis", "HOST", "redis://"+c.Address+"/0")
		section("session", "PROVIDER", "redis", "PROVIDER_CONFIG", "redis://"+c.Address+"/1")
		section("queue", "TYPE", "redis", "CONN_STR", "redis://"+c.Address+"/2")
		// Locks shared by the replicas (Gitea 1.23+); the default is in memory, per pod.
		section("global_lock", "SERVICE_TYPE", "redis", "SERVICE_CONN_STR", "redis://"+c.Address+"/3")
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: configMapName(s.Name), Labels: labels(s)},
		Data:       map[string]string{"app.ini": ini.String()},
	}
}
