// Package schemadraft holds how visor reads the draft a tool's JSON Schema names, one rule for the tools registry
// (which validates calls) and the tool-call parser (which types their values).
package schemadraft

import "github.com/google/jsonschema-go/jsonschema"

// Tolerate clears a $schema naming a draft jsonschema-go cannot validate, so that the resolved schema checks
// values as 2020-12 instead of refusing every one: MCP servers still publish draft-04/06 schemas, whose keywords
// mostly mean the same in 2020-12, and refusing every call of such a tool would help no one.
func Tolerate(s *jsonschema.Schema) {
	switch s.Schema {
	case "", "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft-07/schema#",
		"https://json-schema.org/draft/2020-12/schema":
	default:
		s.Schema = ""
	}
}
