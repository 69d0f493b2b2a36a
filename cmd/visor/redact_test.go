package main

import (
	"strings"
	"testing"
)

// Sessions record their model; an endpoint's credentials must not be stored with it.
func TestModelLabelCarriesNoCredentials(t *testing.T) {
	got := modelLabel(engineFlags{endpoint: "http://alice:s3cret@gpu-box:8080/v1"})
	if strings.Contains(got, "s3cret") || strings.Contains(got, "alice") || !strings.Contains(got, "gpu-box:8080") {
		t.Errorf("modelLabel = %q", got)
	}
}
