package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// Credentials in --endpoint must not reach an error message the user sees (or pastes into an issue).
func TestClientErrorsCarryNoCredentials(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusInternalServerError)
	}))
	defer srv.Close()
	live := strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1)
	dead := "http://alice:s3cret@127.0.0.1:1"
	ctx := context.Background()
	req := Request{ChatCompletionRequest: openai.ChatCompletionRequest{Model: "m",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}}}
	var errs []error
	for _, base := range []string{live, dead} {
		c := NewClient(base, "")
		if strings.Contains(c.BaseURL(), "s3cret") {
			t.Errorf("BaseURL() = %s", c.BaseURL())
		}
		_, err := c.Chat(ctx, req)
		errs = append(errs, err)
		_, err = c.ChatStream(ctx, req)
		errs = append(errs, err)
		errs = append(errs, c.Get(ctx, "/props", &struct{}{}))
		_, err = c.Tokenize(ctx, "hi")
		errs = append(errs, err)
		_, err = c.ApplyTemplate(ctx, req)
		errs = append(errs, err)
		_, err = c.Evaluate(ctx, "hi", nil, Extra{})
		errs = append(errs, err)
	}
	for _, err := range errs {
		if err == nil {
			t.Fatal("a call to a failing server succeeded")
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "alice") {
			t.Errorf("error shows the credentials: %v", err)
		}
	}
}
