package tools_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/visorhq/visor/tools"
)

// A description written in another library's tag dialect would silently vanish from the schema the model sees:
// registration refuses it instead.
func TestForeignTagDialectFailsRegistration(t *testing.T) {
	type in struct {
		Path string `json:"path" jsonschema:"the file to read"`
	}
	_, err := tools.SchemaFor[in]()
	if !errors.Is(err, tools.ErrBadTag) || !strings.Contains(err.Error(), "in.Path") || !strings.Contains(err.Error(), "jsonschema_description") {
		t.Fatalf("err = %v, want ErrBadTag naming the field and the fix", err)
	}
	reg := tools.NewRegistry()
	tl := tools.New("read", "reads", func(context.Context, in) (string, error) { return "", nil })
	if err := reg.Register(tl); err == nil {
		t.Fatal("a tool whose schema lost a description was registered")
	}
	type good struct {
		Path string `json:"path" jsonschema:"minLength=1" jsonschema_description:"the file to read"`
	}
	raw, err := tools.SchemaFor[good]()
	if err != nil || !strings.Contains(string(raw), "the file to read") {
		t.Fatalf("%s %v", raw, err)
	}
}
