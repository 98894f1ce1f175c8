package plan

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/pkg/errors"
)

// Run is an operator's `plan` command: args are the words after "plan", `-f FILE [-o
// text|mermaid|dot|yaml] [-n NAMESPACE]` (-n: the namespace of owners that have none, default
// "default"), and out gets the plans of FILE's owners and their children (Planner.Write). It
// returns an error for bad flags or options, a file that cannot be read or holds no owner of a
// component's kind, and the errors of Planner.Write; flag usage goes to os.Stderr.
func Run(ctx context.Context, args []string, out io.Writer, opts Options) error {
	flags := flag.NewFlagSet("plan", flag.ContinueOnError)
	file := flags.String("f", "", "file with the owner(s) to plan, e.g. config/samples/app.yaml")
	format := flags.String("o", string(Text), "output: text, mermaid, dot or yaml")
	namespace := flags.String("n", "default", "namespace of owners that have none")
	if err := flags.Parse(args); err != nil {
		return errors.WithStack(err)
	}
	if *file == "" {
		return errors.New("-f is required")
	}
	if err := Format(*format).validate(); err != nil {
		return err
	}
	p, err := New(opts)
	if err != nil {
		return err
	}
	f, err := os.Open(*file)
	if err != nil {
		return errors.WithStack(err)
	}
	defer f.Close()
	owners, err := p.Decode(f, *namespace)
	if err != nil {
		return errors.Wrapf(err, "read %s", *file)
	}
	if len(owners) == 0 {
		return errors.Errorf("%s holds no object that a kdag controller reconciles", *file)
	}
	return p.Write(ctx, out, owners, Format(*format))
}
