package tools

import (
	_ "embed" // the icon
	"encoding/base64"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ServerTitle is the name clients show for the server.
const ServerTitle = "BMCIS Knowledge"

//go:embed icon.svg
var iconSVG []byte

// Icon is the server's icon, a small SVG carried as a data URI so no
// client needs to fetch anything. Clients show it; it does not reach the
// model (tools/list targets count descriptions and input schemas).
func Icon() mcp.Icon {
	return mcp.Icon{
		Src:      "data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString(iconSVG),
		MIMEType: "image/svg+xml",
		Sizes:    []string{"any"},
	}
}

// Presentation are the server options shared by the adapter and the
// bridge: title, icon, prompts and completions.
func Presentation() []server.ServerOption {
	return []server.ServerOption{
		server.WithTitle(ServerTitle),
		server.WithIcons(Icon()),
		server.WithPromptCapabilities(false),
		server.WithCompletions(),
	}
}

// toolPresentation gives a read-only tool its display title (also in its
// annotations, for older clients) and the icon.
func toolPresentation(title string) mcp.ToolOption {
	return func(t *mcp.Tool) {
		for _, o := range []mcp.ToolOption{mcp.WithToolTitle(title), mcp.WithToolIcons(Icon()), readOnly(title)} {
			o(t)
		}
	}
}
