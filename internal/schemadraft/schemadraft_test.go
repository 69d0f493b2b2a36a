package schemadraft_test

import (
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/visorhq/visor/internal/schemadraft"
)

// TestTolerateReadsOlderDraftsAs2020: a draft-04 or draft-06 schema, whose every value jsonschema-go refuses as
// published, checks its keywords once tolerated; the drafts it validates keep their $schema.
func TestTolerateReadsOlderDraftsAs2020(t *testing.T) {
	for _, c := range []struct {
		draft string
		kept  bool
	}{
		{"http://json-schema.org/draft-04/schema#", false},
		{"http://json-schema.org/draft-06/schema#", false},
		{"http://json-schema.org/draft-07/schema#", true},
		{"https://json-schema.org/draft/2020-12/schema", true},
		{"", true},
	} {
		var s jsonschema.Schema
		src := `{"$schema":"` + c.draft + `","type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`
		if err := json.Unmarshal([]byte(src), &s); err != nil {
			t.Fatal(err)
		}
		published, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%q as published: %v", c.draft, err)
		}
		if err := published.Validate(map[string]any{"q": "x"}); (err == nil) != c.kept {
			t.Errorf("%q as published: a valid value gives %v; the premise is that only the kept drafts validate", c.draft, err)
		}
		schemadraft.Tolerate(&s)
		if got := s.Schema == c.draft; got != c.kept {
			t.Errorf("%q: $schema now %q, kept = %v, want %v", c.draft, s.Schema, got, c.kept)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%q tolerated: %v", c.draft, err)
		}
		if rs.Validate(map[string]any{"q": "x"}) != nil || rs.Validate(map[string]any{}) == nil {
			t.Errorf("%q tolerated: required q is not checked", c.draft)
		}
	}
}
