package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestResolveSessionIDAmbiguous(t *testing.T) {
	s := openTest(t)
	newSession(t, s, Session{ID: "abc1"})
	newSession(t, s, Session{ID: "abc2"})
	if _, err := s.ResolveSessionID(context.Background(), "abc"); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "abc1") ||
		!strings.HasSuffix(err.Error(), ": type more of it") {
		// Said to the user as it is: the fix ends the line, not ": invalid input".
		t.Errorf("ambiguous prefix: %v", err)
	}
	if id, err := s.ResolveSessionID(context.Background(), "abc2"); err != nil || id != "abc2" {
		t.Errorf("exact: %s %v", id, err)
	}
	if _, err := s.ResolveSessionID(context.Background(), "%"); !errors.Is(err, ErrNotFound) {
		t.Errorf("wildcard must be literal: %v", err)
	}
}
