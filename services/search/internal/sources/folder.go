package sources

import (
	"context"
	"encoding/json"
	"errors"
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
var folderKind = &Kind{Name: "folder", Check: checkFolder, Fetch: fetchFolder, Retry: retryFolder, Root: func(s map[string]string) string { return s["path"] }}

type folderCursor struct {
	Files map[string]fileStamp `json:"files"`
}

type fileStamp struct {
	Size    int64 `json:"size"`
	ModUnix int64 `json:"mod_unix_nano"`
}

// retryFolder forgets the files' stamps: a file without one is read again.
func retryFolder(cursor []byte, ids []string) []byte {
	var c folderCursor
	if json.Unmarshal(cursor, &c) != nil {
		return nil // an unreadable cursor reads every file, as a first run
	}
	for _, id := range ids {
		delete(c.Files, id)
	}
	out, _ := json.Marshal(c)
	return out
}

func checkFolder(s map[string]string, env Env) (map[string]string, error) {
	if err := onlyKeys(s, "path"); err != nil {
		return nil, err
	}
	p, err := folderBelowRoot(s["path"], env, false)
	if err != nil {
		return nil, err
	}
	s["path"] = p
	return s, nil
}

// folderBelowRoot checks that path is an absolute folder below the
// configured root and returns it cleaned. Comparing the strings alone is
// not enough: a symlink inside the volume may lead anywhere, so both are
// resolved (filepath.EvalSymlinks) before the comparison. When adding a
// source the folder may not exist yet (resolve false: only what exists is
// resolved); a run resolves strictly and walks the resolved folder.
func folderBelowRoot(path string, env Env, resolve bool) (string, error) {
	if env.FolderRoot == "" {
		return "", fail(BadSettings, nil, "folder sources need BMCIS_SEARCH_SOURCES_FOLDER_ROOT on the search service (folders on your machine: bmcisctl sync)")
	}
	p := filepath.Clean(path)
	root := filepath.Clean(env.FolderRoot)
	if !filepath.IsAbs(p) || !within(root, p) {
		return "", fail(BadSettings, nil, "path: want an absolute folder below %s", root)
	}
	realRoot, rerr := filepath.EvalSymlinks(root)
	realPath, perr := filepath.EvalSymlinks(p)
	switch {
	case rerr == nil && perr == nil:
		if !within(realRoot, realPath) {
			return "", fail(BadSettings, nil, "path: %s leads outside %s through a symbolic link", p, root)
		}
		if resolve {
			return realPath, nil
		}
	case resolve:
		return "", fail(Unreachable, nil, "read folder %s: %v", p, errors.Join(rerr, perr))
	}
	return p, nil
}

// within reports whether p is root or below it (both clean).
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}

// fetchFolder walks the folder without following symbolic links: a linked
// file or folder, wherever it leads, is not read (WalkDir reports it as a
// non-regular entry and does not descend into it).
func fetchFolder(ctx context.Context, req Request) (*ChangeSet, error) {
	root, err := folderBelowRoot(req.Settings["path"], req.Env, true)
	if err != nil {
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
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
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
