package schemadraft_test

import (
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/visorhq/visor/internal/schemadraft"
)

// TestTolerateReadsOlderDraftsAs2020: a draft-04 or draft-06 schema, whose every value jsonschema-go refuses as
// published, checks its keywords once tolerated; the drafts it validates keep their $schema.
func TestTolerateReadsOlderDraftsAs2020(t *testing.T) {
	kept := map[string]bool{
		"http://json-schema.org/draft-04/schema#":      false,
		"http://json-schema.org/draft-06/schema#":      false,
		"http://json-schema.org/draft-07/schema#":      true,
		"https://json-schema.org/draft/2020-12/schema": true,
		"": true,
	}
	for draft, keep := range kept {
		s := jsonschema.Schema{Schema: draft, Type: "object", Required: []string{"q"},
			Properties: map[string]*jsonschema.Schema{"q": {Type: "string"}}}
		published, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%q as published: %v", draft, err)
		}
		if err := published.Validate(map[string]any{"q": "x"}); (err == nil) != keep {
			t.Errorf("%q as published: a valid value gives %v; the premise is that only the kept drafts validate", draft, err)
		}
		schemadraft.Tolerate(&s)
		if (s.Schema == draft) != keep {
			t.Errorf("%q: $schema now %q, want it kept: %v", draft, s.Schema, keep)
		}
		rs, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%q tolerated: %v", draft, err)
		}
		if rs.Validate(map[string]any{"q": "x"}) != nil || rs.Validate(map[string]any{}) == nil {
			t.Errorf("%q tolerated: required q is not checked", draft)
		}
	}
}
