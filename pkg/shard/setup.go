package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/pkg/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kdag-dev/kdag/pkg/controller"
)

// AssignerLeaderElectionID is the leader election ID (the Lease's name) of the assigner among the
// replicas of a dynamically sharded kdag: give it to ctrl.Options.LeaderElectionID.
const AssignerLeaderElectionID = "assigner.kdag.kdag.dev"

// Add makes mgr a replica of dynamic shards with the ID id (its shard's name): it adds a Member
// (the replica's Lease, renewed while it runs, which stops the manager when it cannot be) and an
// Assigner (run by the replica that leads the election) for the owners of components. The
// manager must be set up as Options.ManagerOptions and Options.ControllerOptions do for a
// replica (its cache and Controllers in shard id, its reconcilers on every replica and the
// Assigner on one); Options.Add calls it. WithNamespace is required. It returns an error when id
// is not a valid shard name or an option is invalid.
func Add(mgr ctrl.Manager, id string, components []controller.Component, opts ...Option) error {
	leases, err := newLeases(mgr)
	if err != nil {
		return err
	}
	member, err := NewMember(id, leases, opts...)
	if err != nil {
		return err
	}
	member.log = mgr.GetLogger()
	assigner, err := NewAssigner(mgr, components, opts...)
	if err != nil {
		return err
	}
	if err := mgr.Add(member); err != nil {
		return errors.Wrap(err, "shard: add the member")
	}
	return errors.Wrap(mgr.Add(assigner), "shard: add the assigner")
}

// SanitizeID turns name (a pod's name, a host name) into a valid replica ID, a DNS-1123 label:
// lower case, every character other than a letter, a digit or '-' replaced by '-', no '-' at
// either end, and a name longer than 63 characters cut to 54 and followed by '-' and 8 hex
// digits of its SHA-256, so that two long names stay apart. It returns "" when nothing is left.
func SanitizeID(name string) string {
	id := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return '-'
		}
	}, name)
	id = strings.Trim(id, "-")
	if len(id) > 63 {
		sum := sha256.Sum256([]byte(name))
		id = strings.TrimRight(id[:54], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	return id
}
