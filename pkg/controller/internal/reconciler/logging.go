package reconciler

import "github.com/go-logr/logr"

// MaxLogVerbosity is the most verbose level of the logger a reconcile runs with: lines of a higher
// V level are dropped whatever the manager's logger allows (--zap-log-level). client-go logs the
// bodies of API requests and responses at V(8) through the logger of the request's context
// (contextual logging), and those bodies hold the data of the Secrets kdag creates. kdag's own
// lines are at V(0) and V(1).
const MaxLogVerbosity = 7

// CapVerbosity returns l dropping lines above MaxLogVerbosity.
func CapVerbosity(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	if _, capped := sink.(cappedSink); capped {
		return l
	}
	return l.WithSink(cappedSink{LogSink: sink})
}

// cappedSink is a logr.LogSink that is disabled above MaxLogVerbosity.
type cappedSink struct{ logr.LogSink }

func (s cappedSink) Enabled(level int) bool {
	return level <= MaxLogVerbosity && s.LogSink.Enabled(level)
}

func (s cappedSink) WithValues(keysAndValues ...any) logr.LogSink {
	return cappedSink{s.LogSink.WithValues(keysAndValues...)}
}

func (s cappedSink) WithName(name string) logr.LogSink { return cappedSink{s.LogSink.WithName(name)} }

// WithCallDepth keeps the caller's file and line right when the sink reports them.
func (s cappedSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return cappedSink{cd.WithCallDepth(depth)}
	}
	return s
}

var _ logr.CallDepthLogSink = cappedSink{}
