package pipeline

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// ProblemSink receives the problems that are new since the last rebuild
// (the Kubernetes controller turns them into Events). pier run has none:
// the book's log lines and the API are its sink.
type ProblemSink interface {
	Report(ctx context.Context, snap *source.Snapshot, fresh []model.Problem)
}

// ProblemBook is the one record of problems for both modes: it keeps the
// problems of the last rebuild by object (what the API shows), remembers
// what was reported, and says what is new, so logs and Events do not
// repeat every rebuild. Safe for concurrent use.
type ProblemBook struct {
	logger *slog.Logger

	mu       sync.RWMutex
	reported map[problemKey]string // message last reported
	byRef    map[model.ObjectRef][]model.Problem
}

type problemKey struct {
	ref           model.ObjectRef
	reason, field string
}

// NewProblemBook returns an empty book that logs new problems to logger.
func NewProblemBook(logger *slog.Logger) *ProblemBook {
	return &ProblemBook{logger: logger, reported: map[problemKey]string{}, byRef: map[model.ObjectRef][]model.Problem{}}
}

// Update replaces the book's problems with those of a rebuild, logs the
// ones not reported before (new, or with a new message) and returns them.
// A problem that went away and comes back is new again.
func (b *ProblemBook) Update(problems []model.Problem) []model.Problem {
	seen := make(map[problemKey]string, len(problems))
	byRef := map[model.ObjectRef][]model.Problem{}
	var fresh []model.Problem
	b.mu.Lock()
	for _, pr := range problems {
		key := problemKey{ref: pr.Ref(), reason: pr.Reason, field: pr.Field}
		seen[key] = pr.Message
		byRef[key.ref] = append(byRef[key.ref], pr)
		if msg, ok := b.reported[key]; ok && msg == pr.Message {
			continue
		}
		fresh = append(fresh, pr)
	}
	b.reported, b.byRef = seen, byRef
	b.mu.Unlock()
	for _, pr := range fresh {
		b.log(pr)
	}
	return fresh
}

func (b *ProblemBook) log(pr model.Problem) {
	// The message names the kind ("ingress refused", "httproute
	// refused"), so an operator searching the log for one kind finds it.
	kind := strings.ToLower(pr.Kind)
	if kind == "" {
		kind = "ingress"
	}
	level, msg := slog.LevelWarn, kind+" warning"
	if pr.Severity == model.SeverityError {
		level, msg = slog.LevelError, kind+" refused"
	}
	what := "ingress"
	name := pr.Namespace + "/" + pr.Name
	if pr.Kind != model.KindIngress {
		what, name = "object", pr.Ref().String()
	}
	b.logger.Log(context.Background(), level, msg, what, name,
		"reason", pr.Reason, "field", pr.Field, "message", pr.Message)
}

// Of returns the problems of one object found by the last rebuild.
func (b *ProblemBook) Of(ref model.ObjectRef) []model.Problem {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return append([]model.Problem(nil), b.byRef[ref]...)
}
