package process

import (
	"context"
	"strings"
	"testing"
)

func TestBadNetnsRefused(t *testing.T) {
	inst := New(Config{Dir: t.TempDir(), Netns: "bad name"})
	if err := inst.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "network namespace") {
		t.Fatalf("Start with a bad namespace name: %v", err)
	}
}
