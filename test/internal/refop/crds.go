// Package refop holds what the tests of the reference operator (Gitea, PostgreSQL, Valkey) share
// to set up a cluster for it.
package refop

import (
	"context"
	"io/fs"
	"time"

	"github.com/pkg/errors"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/config/crd"
)

// InstallCRDs creates the reference operator's CRDs (config/crd/bases, as `make manifests`
// generated them), or updates their spec on a reused cluster, then waits up to 30 s until cl can
// list every kind. cl's scheme must hold apiextensions/v1 and the gitea.kdag.dev types. It
// returns an error naming the file or CRD that could not be parsed or installed, or the wait's
// error.
func InstallCRDs(ctx context.Context, cl client.Client) error {
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return err
	}
	if len(files) != 4 {
		return errors.Errorf("found %d CRD files in config/crd/bases, want 4: run `make manifests`", len(files))
	}
	for _, f := range files {
		raw, err := fs.ReadFile(crd.Bases, f)
		if err != nil {
			return err
		}
		want := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, want); err != nil {
			return errors.Wrapf(err, "parse config/crd/%s", f)
		}
		err = cl.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			live := &apiextensionsv1.CustomResourceDefinition{}
			if err = cl.Get(ctx, client.ObjectKeyFromObject(want), live); err == nil {
				live.Spec = want.Spec
				err = cl.Update(ctx, live)
			}
		}
		if err != nil {
			return errors.Wrapf(err, "install CRD %s", want.Name)
		}
	}
	lists := []client.ObjectList{
		&giteav1alpha1.GiteaList{}, &giteav1alpha1.GiteaServerList{}, &giteav1alpha1.PostgreSQLList{}, &giteav1alpha1.ValkeyList{},
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, l := range lists {
			if cl.List(ctx, l) != nil {
				return false, nil
			}
		}
		return true, nil
	})
}
