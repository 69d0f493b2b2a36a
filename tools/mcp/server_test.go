package mcp_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"os"
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/visorhq/visor/images"
)

// serverEnv makes the test binary serve MCP on stdio instead of running tests, so the stdio tests talk to a
// real subprocess without building another binary.
const serverEnv = "VISOR_MCP_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		if err := testServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			log.Printf("test MCP server: %v", err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type empty struct{}

// testPNG is a real 8x8 PNG; its exact bytes must survive the round trip.
func testPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for y := range 8 {
		for x := range 8 {
			img.Set(x, y, color.RGBA{R: uint8(x * 32), G: uint8(y * 32), B: 200, A: 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

// fullSizeImage is a PNG signature padded to the documented 20 MiB image limit: 27 MiB once base64 in a frame.
func fullSizeImage() []byte {
	b := make([]byte, images.DefaultMaxBytes)
	copy(b, testPNG())
	return b
}

// testServer has typed tools covering text, images, tool errors, a crash and a slow call. Its page size is
// small so listing needs several pages.
func testServer() *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "visor-test", Version: "1"}, &sdk.ServerOptions{PageSize: 2})
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text back"},
		func(ctx context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "screenshot", Description: "Take a screenshot",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "an 8x8 gradient"},
				&sdk.ImageContent{Data: testPNG(), MIMEType: "image/png"},
			}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Always fails"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("disk full")
		})
	sdk.AddTool(s, &sdk.Tool{Name: "pid", Description: "The server's process id"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "crash", Description: "Exit the server process mid-call"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "slow", Description: "Wait until canceled"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "full_screenshot", Description: "An image at the documented 20 MiB limit"},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ empty) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{Data: fullSizeImage(), MIMEType: "image/png"}}}, nil, nil
		})
	sdk.AddTool(s, &sdk.Tool{Name: "files.read/v2", Description: "A name the Registry would refuse as is"},
		func(ctx context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "read " + in.Text}}}, nil, nil
		})
	return s
}
