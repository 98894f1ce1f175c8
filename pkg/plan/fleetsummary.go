package plan

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/pkg/errors"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/apply"
)

// FleetSummary is what a fleet plan found, counted by owner: an owner counts with its child
// owners (a Gitea with its PostgreSQL, Valkey and GiteaServer).
type FleetSummary struct {
	// Owners is the number of owners planned; Unchanged, Changed and Failed split them: nothing
	// changes, something changes (an object not Unchanged), or the plan failed or the API server
	// refuses an object (FleetStatus's exit status 2). A failed owner counts as changed too when
	// its other objects change.
	Owners    int `json:"owners" yaml:"owners"`
	Unchanged int `json:"unchanged" yaml:"unchanged"`
	Changed   int `json:"changed" yaml:"changed"`
	Failed    int `json:"failed" yaml:"failed"`
	// Actions are, per action but Unchanged (Create, Update, Recreate, Refused, Prune, Keep, in
	// that order; those no owner gets left out), the owners with an object that gets it and the
	// number of those objects.
	Actions []ActionCount `json:"actions,omitempty" yaml:"actions,omitempty"`
	// Fields are the fields that Updates and Recreates change, per kind, the most owners first
	// (then the most objects, then by kind and field). kdag's desired-hash annotation, which
	// every update changes, is left out.
	Fields []FieldCount `json:"fields,omitempty" yaml:"fields,omitempty"`
	// Recreates, Refused and Errors name every object that gets a Recreate, every Refused one,
	// and every error: an owner whose plan failed, an object the API server refuses.
	Recreates []FleetObject `json:"recreates,omitempty" yaml:"recreates,omitempty"`
	Refused   []FleetObject `json:"refused,omitempty" yaml:"refused,omitempty"`
	Errors    []FleetObject `json:"errors,omitempty" yaml:"errors,omitempty"`
}

// ActionCount is how many owners get an action, on how many objects.
type ActionCount struct {
	// Action is written as the plan's word for it (actionWords).
	Action  apply.Action `json:"action" yaml:"action"`
	Owners  int          `json:"owners" yaml:"owners"`
	Objects int          `json:"objects" yaml:"objects"`
}

// actionCountWire is an ActionCount as the plan writes it.
type actionCountWire struct {
	Action  string `json:"action" yaml:"action"`
	Owners  int    `json:"owners" yaml:"owners"`
	Objects int    `json:"objects" yaml:"objects"`
}

// MarshalJSON writes a with its action as the plan's word ("Create"), not apply's ("created").
func (a ActionCount) MarshalJSON() ([]byte, error) { return json.Marshal(a.wire()) }

// MarshalYAML is MarshalJSON's YAML counterpart.
func (a ActionCount) MarshalYAML() (any, error) { return a.wire(), nil }

func (a ActionCount) wire() actionCountWire {
	return actionCountWire{Action: actionWord(a.Action), Owners: a.Owners, Objects: a.Objects}
}

// FieldCount is how many owners, and objects, get a change of a field of a kind.
type FieldCount struct {
	Kind    string `json:"kind" yaml:"kind"`
	Field   string `json:"field" yaml:"field"`
	Owners  int    `json:"owners" yaml:"owners"`
	Objects int    `json:"objects" yaml:"objects"`
}

// FleetObject names an object of a fleet plan: the owner planned ("Kind namespace/name"), the
// object ("Kind namespace/name", the owner's or a child owner's; "" for the owner's own
// error), and the change's reason or error.
type FleetObject struct {
	Owner  string `json:"owner" yaml:"owner"`
	Object string `json:"object,omitempty" yaml:"object,omitempty"`
	Reason string `json:"reason" yaml:"reason"`
}

// fleetActions are the actions a summary counts, in its order.
var fleetActions = []apply.Action{apply.Created, apply.Applied, apply.Recreating, apply.Refused, apply.Pruned, apply.Orphaned}

// Summarize counts plans (Planner.Fleet's).
func Summarize(plans []OwnerPlan) FleetSummary {
	s := FleetSummary{Owners: len(plans)}
	type fieldKey struct{ kind, field string }
	actionOwners, actionObjects := map[apply.Action]int{}, map[apply.Action]int{}
	fieldOwners, fieldObjects := map[fieldKey]int{}, map[fieldKey]int{}
	for _, op := range plans {
		switch {
		case op.changing():
			s.Changed++
		case !op.failed():
			s.Unchanged++
		}
		if op.failed() {
			s.Failed++
		}
		if op.Error != "" {
			s.Errors = append(s.Errors, FleetObject{Owner: op.Owner, Reason: op.Error})
		}
		actions, fields := map[apply.Action]bool{}, map[fieldKey]bool{}
		for _, oc := range op.Changes {
			if oc.Error != "" {
				s.Errors = append(s.Errors, FleetObject{Owner: op.Owner, Object: oc.Owner, Reason: oc.Error})
			}
			for _, c := range oc.Changes {
				if c.Error != "" {
					s.Errors = append(s.Errors, FleetObject{Owner: op.Owner, Object: c.title(), Reason: c.Error})
				}
				if !changing(c.Action) {
					continue
				}
				actions[c.Action] = true
				actionObjects[c.Action]++
				switch c.Action {
				case apply.Recreating:
					s.Recreates = append(s.Recreates, FleetObject{Owner: op.Owner, Object: c.title(), Reason: c.Reason})
				case apply.Refused:
					s.Refused = append(s.Refused, FleetObject{Owner: op.Owner, Object: c.title(), Reason: c.Reason})
				}
				for _, f := range c.Fields {
					if f == "metadata.annotations["+kdagv1alpha1.AnnotationDesiredHash+"]" {
						continue
					}
					k := fieldKey{c.Kind, f}
					fields[k] = true
					fieldObjects[k]++
				}
			}
		}
		for a := range actions {
			actionOwners[a]++
		}
		for k := range fields {
			fieldOwners[k]++
		}
	}
	for _, a := range fleetActions {
		if actionOwners[a] > 0 {
			s.Actions = append(s.Actions, ActionCount{Action: a, Owners: actionOwners[a], Objects: actionObjects[a]})
		}
	}
	for k, n := range fieldOwners {
		s.Fields = append(s.Fields, FieldCount{Kind: k.kind, Field: k.field, Owners: n, Objects: fieldObjects[k]})
	}
	slices.SortFunc(s.Fields, func(a, b FieldCount) int {
		return cmp.Or(cmp.Compare(b.Owners, a.Owners), cmp.Compare(b.Objects, a.Objects),
			cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Field, b.Field))
	})
	return s
}

// fleetFieldsShown is how many of the fields that change most the text summary lists.
const fleetFieldsShown = 10

// FleetReport is the document of a fleet plan in YAML and JSON: the summary, and with details
// the plan of every owner.
type FleetReport struct {
	Summary FleetSummary `json:"summary" yaml:"summary"`
	Owners  []OwnerPlan  `json:"owners,omitempty" yaml:"owners,omitempty"`
}

// WriteFleet writes the fleet plan of plans to w in format:
//
//   - Text: the owners planned, unchanged, changed and failed; a table of the owners (and
//     objects) per action; the fleetFieldsShown fields that change most, with their owners and
//     objects; every Recreate, Refused object and error by name, one a line ("  OWNER: OBJECT:
//     REASON"); then, with details, the plan of every owner that changes or failed, as
//     WriteChanges writes it (a failed plan as "OWNER\n  error: ...").
//   - YAML and JSON: a FleetReport, its Owners only with details.
//
// Nothing is printed for an owner that does not change but its count. It returns an error for
// another format and w's errors.
func WriteFleet(w io.Writer, plans []OwnerPlan, format Format, details bool) error {
	if !slices.Contains(liveFormats, format) {
		return errors.Errorf("unknown output %q for --live: use text, yaml or json", string(format))
	}
	report := FleetReport{Summary: Summarize(plans)}
	if details {
		report.Owners = plans
	}
	var b bytes.Buffer
	switch format {
	case JSON:
		raw, err := json.MarshalIndent(report, "", "  ")
		if err != nil {
			return errors.WithStack(err)
		}
		b.Write(raw)
		b.WriteString("\n")
	case YAML:
		if err := writeYAML(&b, report); err != nil {
			return err
		}
	default:
		if err := writeFleetText(&b, report.Summary); err != nil {
			return err
		}
		if details {
			for _, op := range plans {
				if !op.changing() && !op.failed() {
					continue
				}
				if op.Error != "" {
					fmt.Fprintf(&b, "%s\n  error: %s\n\n", op.Owner, op.Error)
					continue
				}
				if err := WriteChanges(&b, op.Changes, Text); err != nil {
					return err
				}
			}
		}
	}
	_, err := w.Write(b.Bytes())
	return errors.WithStack(err)
}

// writeFleetText writes the text summary of s.
func writeFleetText(b *bytes.Buffer, s FleetSummary) error {
	fmt.Fprintf(b, "%d owners planned: %d unchanged, %d changed, %d failed\n", s.Owners, s.Unchanged, s.Changed, s.Failed)
	if len(s.Actions) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ACTION\tOWNERS\tOBJECTS")
		for _, a := range s.Actions {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", actionWord(a.Action), a.Owners, a.Objects)
		}
		if err := tw.Flush(); err != nil {
			return errors.WithStack(err)
		}
	}
	if len(s.Fields) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "FIELDS THAT CHANGE MOST\tOWNERS\tOBJECTS")
		for _, f := range s.Fields[:min(len(s.Fields), fleetFieldsShown)] {
			fmt.Fprintf(tw, "%s %s\t%d\t%d\n", f.Kind, f.Field, f.Owners, f.Objects)
		}
		if err := tw.Flush(); err != nil {
			return errors.WithStack(err)
		}
		if n := len(s.Fields) - fleetFieldsShown; n > 0 {
			fmt.Fprintf(b, "(%d more: -o yaml lists them all)\n", n)
		}
	}
	for _, list := range []struct {
		title   string
		objects []FleetObject
	}{{"Recreate", s.Recreates}, {"Refused", s.Refused}, {"Errors", s.Errors}} {
		if len(list.objects) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n%s (%d):\n", list.title, len(list.objects))
		for _, o := range list.objects {
			if o.Object == "" || o.Object == o.Owner {
				fmt.Fprintf(b, "  %s: %s\n", o.Owner, o.Reason)
				continue
			}
			fmt.Fprintf(b, "  %s: %s: %s\n", o.Owner, o.Object, o.Reason)
		}
	}
	b.WriteString("\n")
	return nil
}
