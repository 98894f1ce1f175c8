package plan

import (
	"context"
	"flag"
	"io"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fleetArgs are the flags of a fleet plan (`plan --live --all`).
type fleetArgs struct {
	all, allNamespaces, details bool
	selector                    string
}

// bind registers the fleet plan's flags on flags.
func (f *fleetArgs) bind(flags *flag.FlagSet) {
	flags.BoolVar(&f.all, "all", false, "with --live: plan every owner of the operator's kinds on the cluster (in -n NAMESPACE, or -A), a summary first")
	flags.BoolVar(&f.allNamespaces, "A", false, "with --live --all: the owners of every namespace")
	flags.StringVar(&f.selector, "l", "", "with --live --all: only the owners this label selector matches, e.g. tier=prod")
	flags.BoolVar(&f.details, "details", false, "with --live --all: after the summary, the plan of every owner that changes")
}

// validate returns an error when the fleet flags are used without --live --all, or -A with -n.
func (f fleetArgs) validate(live, nsSet bool) error {
	switch {
	case f.all && !live:
		return errors.New("--all needs --live: plan --live --all")
	case !f.all && (f.allNamespaces || f.selector != "" || f.details):
		return errors.New("-A, -l and --details go with --live --all")
	case f.allNamespaces && nsSet:
		return errors.New("-A plans every namespace: drop -n NAMESPACE")
	}
	return nil
}

// runFleet is Run with --live --all, once connected: c writes only dry runs.
func runFleet(ctx context.Context, out io.Writer, p *Planner, c client.Client, a liveArgs, parallel int) error {
	selector := labels.Everything()
	if a.fleet.selector != "" {
		var err error
		if selector, err = labels.Parse(a.fleet.selector); err != nil {
			return errors.Wrapf(err, "-l %q", a.fleet.selector)
		}
	}
	namespace := a.namespace
	if a.fleet.allNamespaces {
		namespace = ""
	}
	owners, err := p.ListOwners(ctx, c, namespace, selector)
	if err != nil {
		return err
	}
	plans := p.Fleet(ctx, c, owners, parallel)
	if err := WriteFleet(out, plans, a.format, a.fleet.details); err != nil {
		return err
	}
	return FleetStatus(plans)
}
