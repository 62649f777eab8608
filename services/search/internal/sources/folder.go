package sources

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bmcis/knowledge/platform/docformat"
)

// folderKind mirrors a folder the search service can read (a mounted
// volume) below BMCIS_SEARCH_SOURCES_FOLDER_ROOT: settings path. Folders on an
// operator's machine keep using `bmcisctl sync`, whose sources are this
// kind without a schedule. The cursor keeps each file's size and
// modification time, so an unchanged file is not read again.
var folderKind = &Kind{Name: "folder", Check: checkFolder, Fetch: fetchFolder, Root: func(s map[string]string) string { return s["path"] }}

type folderCursor struct {
	Files map[string]fileStamp `json:"files"`
}

type fileStamp struct {
	Size    int64 `json:"size"`
	ModUnix int64 `json:"mod_unix_nano"`
}

func checkFolder(s map[string]string, env Env) (map[string]string, error) {
	if err := onlyKeys(s, "path"); err != nil {
		return nil, err
	}
	if env.FolderRoot == "" {
		return nil, fail(BadSettings, nil, "folder sources need BMCIS_SEARCH_SOURCES_FOLDER_ROOT on the search service (folders on your machine: bmcisctl sync)")
	}
	p := filepath.Clean(s["path"])
	root := filepath.Clean(env.FolderRoot)
	if !filepath.IsAbs(p) || (p != root && !strings.HasPrefix(p, root+string(filepath.Separator))) {
		return nil, fail(BadSettings, nil, "path: want an absolute folder below %s", root)
	}
	s["path"] = p
	return s, nil
}

func fetchFolder(ctx context.Context, req Request) (*ChangeSet, error) {
	root := req.Settings["path"]
	if _, err := checkFolder(map[string]string{"path": root}, req.Env); err != nil {
		return nil, err
	}
	var last folderCursor
	if len(req.Cursor) > 0 {
		_ = json.Unmarshal(req.Cursor, &last)
	}
	next := folderCursor{Files: map[string]fileStamp{}}
	cs := &ChangeSet{Full: true}
	lim := req.Env.Limits
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err // an unreadable folder fails the run: nothing is deleted
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		id := filepath.ToSlash(rel)
		if f, ok := docformat.ForPath(id); !ok || f.Container() || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if len(next.Files) >= lim.MaxFiles {
			return fail(TooLarge, nil, "more than %d files (BMCIS_SEARCH_SOURCES_MAX_FILES)", lim.MaxFiles)
		}
		stamp := fileStamp{Size: info.Size(), ModUnix: info.ModTime().UnixNano()}
		next.Files[id] = stamp
		if old, ok := last.Files[id]; ok && old == stamp {
			cs.Unchanged = append(cs.Unchanged, id)
			return nil
		}
		if info.Size() > lim.MaxFileBytes {
			cs.Skipped = append(cs.Skipped, Skip{ID: id, Reason: fmt.Sprintf("too large: %d bytes (limit %d)", info.Size(), lim.MaxFileBytes)})
			delete(next.Files, id)
			return nil
		}
		total += info.Size()
		if lim.MaxTotalBytes > 0 && total > lim.MaxTotalBytes {
			return fail(TooLarge, nil, "the changed files exceed %d bytes (BMCIS_SEARCH_SOURCES_MAX_TOTAL_BYTES)", lim.MaxTotalBytes)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		cs.Upserts = append(cs.Upserts, File{ID: id, Content: b, Category: firstFolder(id), UpdatedAt: info.ModTime().UTC().Truncate(time.Second)})
		return nil
	})
	if err != nil {
		if CodeOf(err) != "" {
			return nil, err
		}
		return nil, fail(Unreachable, nil, "read folder %s: %v", root, err)
	}
	cs.Cursor, _ = json.Marshal(next)
	return cs, nil
}
