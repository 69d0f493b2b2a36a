package memory

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// TestEngineCostsSurviveReopen stores two engines' cost models, replaces one, and reads them back from a
// reopened file: the newest write wins, and a key never stored is reported as absent, not as an error.
func TestEngineCostsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveEngineCosts(ctx, "a|p||", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveEngineCosts(ctx, "b|||", []byte(`{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveEngineCosts(ctx, "a|p||", []byte(`{"v":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveEngineCosts(ctx, "c", []byte(`{"v":`)); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("truncated JSON: %v, want ErrInvalidInput", err)
	}
	if err := s.SaveEngineCosts(ctx, "", []byte(`{}`)); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("empty key: %v, want ErrInvalidInput", err)
	}
	s.Close()
	if s, err = Open(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, ok, err := s.LoadEngineCosts(ctx, "a|p||")
	if err != nil || !ok || string(c.Costs) != `{"v":3}` || c.UpdatedAt.IsZero() {
		t.Errorf("load a: %+v %v %v", c, ok, err)
	}
	if _, ok, err := s.LoadEngineCosts(ctx, "nope"); ok || err != nil {
		t.Errorf("load of a key never stored: ok %v, %v", ok, err)
	}
	list, err := s.ListEngineCosts(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
}
