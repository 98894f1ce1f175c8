package postgresql

import (
	"github.com/pkg/errors"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// The names below are the component's outputs: other components (and users) find the server
// and its credentials by them. They depend on the PostgreSQL object's name only.

// ServiceName is the name of the headless Service in front of the server.
func ServiceName(pgName string) string { return pgName }

// CredentialsSecretName is the name of the generated Secret with the keys host, port, user,
// password and database (giteav1alpha1.DatabaseSecret*Key).
func CredentialsSecretName(pgName string) string { return pgName + "-credentials" }

// DataClaimName is the name of the claim holding the database's data: the StatefulSet's claim
// of template "data" for its only pod.
func DataClaimName(pgName string) string { return "data-" + pgName + "-0" }

// Host is the server's DNS name inside the cluster.
func Host(pgName, namespace string) string { return ServiceName(pgName) + "." + namespace + ".svc" }

// Port is the server's port.
const Port = giteav1alpha1.DefaultPostgreSQLPort

func labels(pg *giteav1alpha1.PostgreSQL) map[string]string {
	return common.Labels("postgresql", pg.Name, "database")
}

// MaxNameLength is the longest name a PostgreSQL can have. Its StatefulSet has its name, and the
// StatefulSet controller labels the pods with controller-revision-hash "<name>-<hash>", up to 11
// characters longer, which as a label value must not exceed 63: with a longer name no pod is
// ever created.
const MaxNameLength = 52

// ValidateName returns an error naming the StatefulSet when a PostgreSQL named pgName cannot run.
func ValidateName(pgName string) error {
	if len(pgName) > MaxNameLength {
		return errors.Errorf("StatefulSet %q: must be no more than %d characters, or its pods' controller-revision-hash "+
			"label (the name and an 11-character hash) exceeds 63", pgName, MaxNameLength)
	}
	return nil
}
