package gitea

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/pkg/errors"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/controllers/valkey"
)

// Validate implements controller.Validator for what the schema cannot see: the names the
// components derive from the Gitea's name must be valid Service and label names (DNS-1035
// labels: at most 63 characters, no dots, starting with a letter), which a long Gitea name, or
// one with a dot or a leading digit, breaks; and the managed database's StatefulSet name must
// leave room for its pods' revision label (postgresql.MaxNameLength).
func (ResourceManager) Validate(_ context.Context, g *giteav1alpha1.Gitea) error {
	names := []string{
		giteaserver.ServiceName(serverName(g)),
		giteaserver.MigrationJobName(serverName(g), g.Spec.Version),
	}
	if g.Spec.Database.Type != giteav1alpha1.DatabaseExternal {
		names = append(names, postgresql.ServiceName(postgreSQLName(g))+"-0") // the StatefulSet's pod
	}
	if g.Spec.Cache.IsEnabled() {
		names = append(names, valkey.ServiceName(valkeyName(g)))
	}
	var problems []string
	for _, n := range names {
		if errs := validation.IsDNS1035Label(n); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s: %s", abbreviated(n), strings.Join(errs, ", ")))
		}
	}
	if g.Spec.Database.Type != giteav1alpha1.DatabaseExternal {
		if err := postgresql.ValidateName(postgreSQLName(g)); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		// The advice comes first: the condition message is capped, and a long name repeated in
		// every problem would push it out.
		return reconcile.TerminalError(errors.Errorf("use a shorter name of lowercase letters, digits and '-' that starts with a letter: "+
			"the name %s gives invalid names to the objects derived from it (%s)", abbreviated(g.Name), strings.Join(problems, "; ")))
	}
	return nil
}

// abbreviated quotes name for a message, shortened when it is over 128 characters (a name near
// the API server's limit of 253): its first and last 20 characters, which keep the suffix that
// says which object it is, and its length. Then the name, repeated in every problem, does not
// fill the condition message (capped at 1024 characters) before the rule it breaks is said.
func abbreviated(name string) string {
	const keep, limit = 20, 128
	if len(name) <= limit {
		return strconv.Quote(name)
	}
	return strconv.Quote(name[:keep]+"..."+name[len(name)-keep:]) + " (" + strconv.Itoa(len(name)) + " characters)"
}
