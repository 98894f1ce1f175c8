package shard

import (
	"strings"

	"github.com/pkg/errors"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// Static shards, as Flux shards its controllers: each manager reconciles the owners labelled
// kdag.dev/shard with its shard's name, an unsharded manager those without the label. A shard is
// a layer over pkg/controller, not code inside it: the manager's cache selects the shard's owners
// and objects (SelectCache), each Controller leaves other owners alone (InShard, given as
// controller.Options.OwnerFilter), and the objects kdag applies carry their owner's shard label
// (pkg/apply copies it), so a child owner lands in its parent's shard. Dynamic shards add the
// hand-over (HandOver). docs/sharding.md is the user's side.

// ValidateName returns nil when shard can name a shard: "" (no shard) or a DNS-1123 label
// (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63
// characters). That is a valid label value, and, unlike some label values ('_', upper case), it
// also makes a valid Lease name in LeaderElectionID. The error says what is wrong and how to fix
// it.
func ValidateName(shard string) error {
	if shard == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Label(shard); len(msgs) > 0 {
		return errors.Errorf("shard %q is not a valid shard name: %s (it is the value of the %s label and part of the "+
			"leader election Lease's name)", shard, strings.Join(msgs, "; "), kdagv1alpha1.LabelShard)
	}
	return nil
}

// LeaderElectionID returns the leader election ID (the Lease's name) of a manager of shard whose
// unsharded ID is id: id itself without a shard, else "<shard>.<id>" ("a.kdag.kdag.dev"), so
// that the managers of different shards do not elect against each other while the replicas of
// one shard still do. It returns an error when shard is not valid (ValidateName) or the result
// is not a valid Lease name (a DNS-1123 subdomain).
func LeaderElectionID(id, shard string) (string, error) {
	if err := ValidateName(shard); err != nil {
		return "", err
	}
	if shard != "" {
		id = shard + "." + id
	}
	if msgs := validation.IsDNS1123Subdomain(id); len(msgs) > 0 {
		return "", errors.Errorf("leader election ID %q is not a valid Lease name: %s", id, strings.Join(msgs, "; "))
	}
	return id, nil
}

// Requirement returns the label requirement that selects shard's owners and objects:
// kdag.dev/shard=shard, or, without a shard, no kdag.dev/shard label at all. It returns an error
// when shard is not valid (ValidateName).
func Requirement(shard string) (labels.Requirement, error) {
	if err := ValidateName(shard); err != nil {
		return labels.Requirement{}, err
	}
	op, values := selection.Equals, []string{shard}
	if shard == "" {
		op, values = selection.DoesNotExist, nil
	}
	req, err := labels.NewRequirement(kdagv1alpha1.LabelShard, op, values)
	if err != nil {
		return labels.Requirement{}, errors.WithStack(err)
	}
	return *req, nil
}

// SelectCache returns opts (controller.CacheOptions' result) with every ByObject entry's label
// selector narrowed to shard's objects (Requirement), so that the manager's cache, and so its
// memory, holds its shard's owners and the objects kdag applied for them, not the others'. The
// types opts has no entry for are not narrowed: controller.CacheOptions gives every owner type
// and owned type one. ControllerRevisions are not narrowed either: kdag records an owner's
// revisions without a shard label, so that its history stays whole when it moves (every replica
// caches their metadata). It returns an error when shard is not valid. opts is not changed.
func SelectCache(opts cache.Options, shard string) (cache.Options, error) {
	req, err := Requirement(shard)
	if err != nil {
		return opts, err
	}
	byObject := make(map[client.Object]cache.ByObject, len(opts.ByObject))
	for obj, by := range opts.ByObject {
		if _, revisions := obj.(*appsv1.ControllerRevision); revisions {
			byObject[obj] = by
			continue
		}
		sel := by.Label
		if sel == nil {
			sel = labels.Everything()
		}
		by.Label = sel.Add(req)
		byObject[obj] = by
	}
	opts.ByObject = byObject
	return opts, nil
}

// InShard returns the owner filter of a manager of shard (controller.Options.OwnerFilter): true for
// an owner labelled kdag.dev/shard=shard, or, without a shard, for an owner without the label.
// The cache from SelectCache holds only such owners; the filter keeps a manager whose cache
// does not from reconciling another shard's owners.
func InShard(shard string) func(owner client.Object) bool {
	return func(owner client.Object) bool {
		got, ok := owner.GetLabels()[kdagv1alpha1.LabelShard]
		if shard == "" {
			return !ok
		}
		return ok && got == shard
	}
}
