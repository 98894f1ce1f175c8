package localcluster

import (
	"context"
	"time"

	"github.com/pkg/errors"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// installCRDs creates or updates each of crds on the API server of cfg, then waits up to timeout
// until every one is Established and discovery lists each of its served versions' resources.
func installCRDs(ctx context.Context, cfg *rest.Config, timeout time.Duration, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return errors.Wrap(err, "create apiextensions client")
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, want := range crds {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			live, err := api.Get(ctx, want.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = api.Create(ctx, want.DeepCopy(), metav1.CreateOptions{})
				return err
			}
			if err != nil {
				return err
			}
			update := want.DeepCopy()
			update.ResourceVersion = live.ResourceVersion
			_, err = api.Update(ctx, update, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return errors.Wrapf(err, "create or update CustomResourceDefinition %s", want.Name)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return errors.Wrap(err, "create discovery client")
	}
	for _, want := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			return served(ctx, api.Get, dc, want), nil
		})
		if err != nil {
			return errors.Wrapf(err, "CustomResourceDefinition %s not established and served within %s", want.Name, timeout)
		}
	}
	return nil
}

// served reports whether crd is Established and discovery lists its plural under every served
// version. Errors count as "not yet": the API server may still be installing the handlers.
func served(ctx context.Context, get func(context.Context, string, metav1.GetOptions) (*apiextensionsv1.CustomResourceDefinition, error),
	dc discovery.DiscoveryInterface, crd *apiextensionsv1.CustomResourceDefinition) bool {
	live, err := get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	established := false
	for _, c := range live.Status.Conditions {
		established = established || c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	}
	if !established {
		return false
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		list, err := dc.ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
		if err != nil {
			return false
		}
		found := false
		for _, r := range list.APIResources {
			found = found || r.Name == crd.Spec.Names.Plural
		}
		if !found {
			return false
		}
	}
	return true
}
