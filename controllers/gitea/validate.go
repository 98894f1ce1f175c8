package gitea

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/giteaserver"
	"github.com/kdag-dev/kdag/controllers/postgresql"
	"github.com/kdag-dev/kdag/controllers/valkey"
)

// Validate implements controller.Validator for what the schema cannot see: the names the
// components derive from the Gitea's name must be valid Service and label names (at most 63
// characters), which a long Gitea name breaks.
func (ResourceManager) Validate(_ context.Context, owner client.Object) error {
	g := owner.(*giteav1alpha1.Gitea)
	names := []string{
		giteaserver.ServiceName(serverName(g)),
		giteaserver.MigrationJobName(serverName(g), g.Spec.Version),
	}
	if g.Spec.Database.Type != giteav1alpha1.DatabaseExternal {
		names = append(names, postgresql.ServiceName(postgreSQLName(g))+"-0") // the StatefulSet's pod
	}
	if g.Spec.Cache.Enabled {
		names = append(names, valkey.ServiceName(valkeyName(g)))
	}
	var problems []string
	for _, n := range names {
		if errs := validation.IsDNS1035Label(n); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%q: %s", n, strings.Join(errs, ", ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the name %q is too long for the objects derived from it (%s): use a shorter name",
			g.Name, strings.Join(problems, "; "))
	}
	return nil
}
