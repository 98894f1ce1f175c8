// Package refop holds what the tests of the reference operator (Gitea, PostgreSQL, Valkey) share
// to set up a cluster for it.
package refop

import (
	"context"
	"io/fs"

	"github.com/pkg/errors"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/kdag-dev/kdag/config/crd"
	"github.com/kdag-dev/kdag/pkg/testing/cluster"
)

// InstallCRDs installs the reference operator's CRDs (config/crd/bases, as `make manifests`
// generated them) on c with Cluster.InstallCRDs: it creates them, or updates them on a reused
// cluster, and waits until they are served. It returns an error naming the file that could not be
// parsed, or Cluster.InstallCRDs's error.
func InstallCRDs(c *cluster.Cluster) error {
	files, err := fs.Glob(crd.Bases, "bases/*.yaml")
	if err != nil {
		return errors.WithStack(err)
	}
	if len(files) != 4 {
		return errors.Errorf("found %d CRD files in config/crd/bases, want 4: run `make manifests`", len(files))
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		raw, err := fs.ReadFile(crd.Bases, f)
		if err != nil {
			return errors.WithStack(err)
		}
		want := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, want); err != nil {
			return errors.Wrapf(err, "parse config/crd/%s", f)
		}
		crds = append(crds, want)
	}
	return c.InstallCRDs(context.Background(), crds...)
}
