package apply

import (
	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/resources"
	"github.com/kdag-dev/kdag/pkg/tracing"
)

// DesiredOptions are what Desired needs to know of an object besides its content; the zero
// value is an object of its owner's, deleted with it, that depends on nothing.
type DesiredOptions struct {
	// Keep is the deletion policy keep: the object gets kdag.dev/resource-policy: keep and no
	// owner reference, so that the garbage collector never deletes it.
	Keep bool
	// Release: the live object is kept by its own annotation (Kept, set by a user on an object
	// kdag created): the object gets no owner reference, so that applying it removes
	// the one kdag set before and the garbage collector never deletes it. Unlike Keep, kdag does
	// not write the annotation: it stays the user's to remove.
	Release bool
	// DependenciesHash, when not empty, is written as kdag.dev/dependencies-hash on the object
	// and on its pod template (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob), so
	// that a change of what the object depends on rolls its pods.
	DependenciesHash string
}

// Desired returns obj as Apply wants it for owner: a copy, prepared for server-side apply
// (resources.Desired: apiVersion and kind from gvk, no status, no server-set metadata), with
// kdag's labels (kdagv1alpha1.LabelManagedBy, LabelController, LabelOwnerUID, and LabelShard
// with the owner's value when the owner has one, none otherwise; the hash leaves LabelShard
// out), a controller owner
// reference to owner where one can be held (ExpectsOwnerReference) and o does not Release it,
// o's annotations, the owner's kdag.dev/drift annotation on a custom resource (a child owner:
// the owner's drift policy reaches the child's objects) unless the object sets its own, and last
// kdag.dev/desired-hash over all of that. scheme must know owner's type. It returns an error,
// naming the object, when obj cannot be converted or the owner reference cannot be set (owner
// not in scheme). obj is not changed.
func Desired(owner Owner, obj client.Object, gvk schema.GroupVersionKind, scheme *runtime.Scheme, o DesiredOptions) (*unstructured.Unstructured, error) {
	name := gvk.Kind + " " + client.ObjectKeyFromObject(obj).String()
	obj, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return nil, errors.Errorf("%s: not a client.Object", name)
	}
	lbls := obj.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[kdagv1alpha1.LabelManagedBy] = "kdag"
	lbls[kdagv1alpha1.LabelController] = owner.Controller
	lbls[kdagv1alpha1.LabelOwnerUID] = string(owner.Object.GetUID())
	setShard(lbls, owner.Object)
	obj.SetLabels(lbls)
	if drift, ok := owner.Object.GetAnnotations()[kdagv1alpha1.AnnotationDrift]; ok && !clientgoscheme.Scheme.Recognizes(gvk) {
		// A custom resource, such as a child owner that kdag reconciles too: the owner's drift
		// policy reaches the child's objects, as a platform team annotates the CR it applied.
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		if _, own := ann[kdagv1alpha1.AnnotationDrift]; !own {
			ann[kdagv1alpha1.AnnotationDrift] = drift
			obj.SetAnnotations(ann)
		}
	}
	if o.Keep {
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[kdagv1alpha1.AnnotationResourcePolicy] = kdagv1alpha1.ResourcePolicyKeep
		obj.SetAnnotations(ann)
	}
	if ExpectsOwnerReference(owner.Object, obj) && !o.Release {
		obj.SetOwnerReferences(nil)
		if err := controllerutil.SetControllerReference(owner.Object, obj, scheme); err != nil {
			return nil, errors.Wrapf(err, "%s: set owner reference", name)
		}
	}
	u, err := resources.Desired(obj, gvk)
	if err != nil {
		return nil, errors.Wrapf(err, "%s: prepare for apply", name)
	}
	if o.DependenciesHash != "" {
		setAnnotation(u, kdagv1alpha1.AnnotationDependenciesHash, o.DependenciesHash)
		if err := annotatePodTemplate(u, kdagv1alpha1.AnnotationDependenciesHash, o.DependenciesHash); err != nil {
			return nil, errors.Wrapf(err, "%s: annotate pod template", name)
		}
	}
	// The shard label is left out of the hash: moving an owner to another shard changes that
	// label alone, which the apply writes anyway (the object is not in the new shard's cache),
	// and a changed hash annotation would bump a Deployment's generation, making it look
	// unavailable until its controller observes it.
	shard, sharded := u.GetLabels()[kdagv1alpha1.LabelShard]
	if sharded {
		l := u.GetLabels()
		delete(l, kdagv1alpha1.LabelShard)
		u.SetLabels(l)
	}
	hash, err := resources.DesiredHash(u, kdagv1alpha1.AnnotationDesiredHash, tracing.AnnotationTraceParent)
	if err != nil {
		return nil, errors.Wrapf(err, "%s: hash desired object", name)
	}
	if sharded {
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[kdagv1alpha1.LabelShard] = shard
		u.SetLabels(l)
	}
	setAnnotation(u, kdagv1alpha1.AnnotationDesiredHash, hash)
	return u, nil
}

// annotatePodTemplate sets key on the pod template of a workload (Deployment, StatefulSet,
// DaemonSet, ReplicaSet, Job: spec.template; CronJob: spec.jobTemplate.spec.template), so that
// a change of the value rolls the pods. Other kinds are left alone.
func annotatePodTemplate(u *unstructured.Unstructured, key, value string) error {
	for _, path := range [][]string{{"spec", "template"}, {"spec", "jobTemplate", "spec", "template"}} {
		tmpl, found, err := unstructured.NestedMap(u.Object, path...)
		if err != nil || !found {
			continue
		}
		if _, isPod := tmpl["spec"]; !isPod {
			continue
		}
		return unstructured.SetNestedField(u.Object, value, append(path, "metadata", "annotations", key)...)
	}
	return nil
}

// setShard gives lbls, the labels of an object applied for owner, owner's kdag.dev/shard value,
// or removes the label when owner has none: an object's shard is its owner's, so that the
// owner's shard caches it, whatever the author's object says.
func setShard(lbls map[string]string, owner client.Object) {
	if shard, ok := owner.GetLabels()[kdagv1alpha1.LabelShard]; ok {
		lbls[kdagv1alpha1.LabelShard] = shard
	} else {
		delete(lbls, kdagv1alpha1.LabelShard)
	}
}

// InheritedLabels returns what Desired copies from owner's labels onto every object it renders
// for owner, as one comparable string: "" when the owner has no kdag.dev/shard label, "=" and its
// value otherwise (an empty value is a label too). Two owners with the same InheritedLabels get
// objects with the same labels from the same author's objects, so a caller that remembers a
// rendered object can key the memory by it.
func InheritedLabels(owner client.Object) string {
	if v, ok := owner.GetLabels()[kdagv1alpha1.LabelShard]; ok {
		return "=" + v
	}
	return ""
}
