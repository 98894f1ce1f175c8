package controller

import (
	"strings"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
)

// Static shards (issue 17), as Flux shards its controllers: each manager reconciles the owners
// labelled kdag.dev/shard with its shard's name (WithShard), an unsharded manager those without
// the label. The manager's cache holds only its shard's owners and objects (CacheOptions), and
// the objects kdag applies carry their owner's shard label (apply.Desired), so a child owner
// lands in its parent's shard. docs/sharding.md is the user's side.

// ValidateShard returns nil when shard can name a shard: "" (no shard) or a DNS-1123 label
// (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63
// characters). That is a valid label value, and, unlike some label values ('_', upper case), it
// also makes a valid Lease name in LeaderElectionID. The error says what is wrong and how to fix
// it.
func ValidateShard(shard string) error {
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
// one shard still do. It returns an error when shard is not valid (ValidateShard) or the result
// is not a valid Lease name (a DNS-1123 subdomain).
func LeaderElectionID(id, shard string) (string, error) {
	if err := ValidateShard(shard); err != nil {
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

// shardRequirement returns the label requirement that selects shard's objects:
// kdag.dev/shard=shard, or, without a shard, no kdag.dev/shard label at all. It returns an error
// when shard is not valid.
func shardRequirement(shard string) (labels.Requirement, error) {
	if err := ValidateShard(shard); err != nil {
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

// inShard reports whether owner is the Controller's to reconcile: labelled with its shard, or,
// without a shard, not labelled at all. The manager's cache holds only such owners when it was
// set up with CacheOptions; this check keeps a manager whose cache is not from reconciling
// another shard's owners.
func (c *Controller) inShard(owner client.Object) bool {
	shard, ok := owner.GetLabels()[kdagv1alpha1.LabelShard]
	if c.opts.Shard == "" {
		return !ok
	}
	return ok && shard == c.opts.Shard
}
