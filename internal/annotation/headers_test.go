package annotation

import (
	"strings"
	"testing"
)

// The configuration-snippet refusal names the typed header annotations.
func TestSnippetNamesHeaderAnnotations(t *testing.T) {
	msg := snippetAdvice(NginxPrefix+"configuration-snippet", "x")
	if !strings.Contains(msg, RequestHeaders) || !strings.Contains(msg, ResponseHeaders) {
		t.Errorf("message %q", msg)
	}
}
