package mcptool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/valetkit/valet/tool"
)

// Change is a tool whose description, input schema or risk (from its
// annotations) changed on the server since the host accepted it. It is
// held back, not offered to the model, until Set.Accept takes it: a server
// cannot swap what an accepted tool does behind the host's back (a "rug
// pull").
type Change struct {
	// Name is the tool's name in valet ("fs_read_file"); Tool its name on
	// the server.
	Name, Tool string
	// Description, Schema and Risk are the tool as the server lists it
	// now; the Old ones as it was accepted. Descriptions are as offered to
	// the model: cut to Config.MaxDescriptionBytes.
	Description, OldDescription string
	Schema, OldSchema           json.RawMessage
	Risk, OldRisk               tool.Risk
	// Fingerprint identifies this version of the tool; Accept checks it,
	// so a tool that changed again since Changed was read is not accepted
	// unseen.
	Fingerprint string
}

// Refusal is a tool the server lists that the Set does not offer.
type Refusal struct {
	// Tool is the tool's name on the server; Name its name in valet, when
	// it has one.
	Tool, Name string
	// Err says why; it wraps ErrRefused.
	Err error
}

// toolState is what a Set knows of the server's tools; guarded by Set.mu.
type toolState struct {
	listed   []*remoteTool          // the last listing, in server order, refused tools left out
	accepted map[string]*remoteTool // by server name: the version the host accepts (first seen, or Accept)
	held     map[string]*remoteTool // by server name: a listed version that differs from the accepted one
	refused  []Refusal
	offered  []tool.Tool            // listed tools matching their accepted version
	current  map[string]*remoteTool // by server name: those offered
	warned   map[string]string      // by server name: the fingerprint last warned about
}

func (st *toolState) init() {
	st.accepted = make(map[string]*remoteTool)
	st.held = make(map[string]*remoteTool)
	st.current = make(map[string]*remoteTool)
	st.warned = make(map[string]string)
}

// apply takes a new listing. A tool seen for the first time is accepted;
// one that differs from its accepted version is held back (WARN once per
// version); one that cannot be used is refused (WARN once per version).
func (st *toolState) apply(s *Set, list []listedTool) {
	var listed []*remoteTool
	var refused []Refusal
	names := make(map[string]string, len(list)) // valet name → server name
	clear(st.held)
	for _, lt := range list {
		mt, name, rt, err := lt.tool, lt.name, lt.rt, lt.err
		if name != "" {
			if other, dup := names[name]; dup {
				rt, err = nil, fmt.Errorf("%w: %q and %q would both be named %q", ErrRefused, other, mt.Name, name)
			} else {
				names[name] = mt.Name
			}
		}
		if err != nil {
			refused = append(refused, Refusal{Tool: mt.Name, Name: name, Err: err})
			if st.warned[mt.Name] != "refused:"+err.Error() {
				st.warned[mt.Name] = "refused:" + err.Error()
				s.log.Warn("mcptool: a tool of the server is refused", "tool", mt.Name, "err", err)
			}
			continue
		}
		acc := st.accepted[mt.Name]
		switch {
		case acc == nil:
			st.accepted[mt.Name] = rt
		case acc.fp == rt.fp && acc.spec.Name == rt.spec.Name:
			rt = acc // the same tool: keep the value the runs know
		default:
			st.held[mt.Name] = rt
			if st.warned[mt.Name] != rt.fp {
				st.warned[mt.Name] = rt.fp
				s.log.Warn("mcptool: a tool changed on the server; held back until the host accepts it (Set.Changed, Set.Accept)",
					"tool", mt.Name, "name", rt.spec.Name)
			}
		}
		listed = append(listed, rt)
	}
	st.listed, st.refused = listed, refused
	st.offer()
}

// listedTool is one tool of a listing, prepared (named, its schema
// compiled) without holding Set.mu.
type listedTool struct {
	tool *mcp.Tool
	name string      // valet's name, "" when it has none
	rt   *remoteTool // nil when refused
	err  error       // why it is refused
}

// prepare names each listed tool and compiles its input schema, reusing
// the schemas compiled for an earlier listing. It gives up when ctx ends.
// Called with connMu held.
func (s *Set) prepare(ctx context.Context, list []*mcp.Tool) ([]listedTool, error) {
	out := make([]listedTool, 0, len(list))
	fresh := make(map[[32]byte]compiled, len(list))
	for _, mt := range list {
		if mt == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lt := listedTool{tool: mt}
		lt.name, lt.err = toolName(s.server.Name, mt.Name)
		if lt.err == nil {
			lt.rt, lt.err = s.newRemoteTool(lt.name, mt, fresh)
		}
		out = append(out, lt)
	}
	s.schemas = fresh // only this listing's: a server changing schemas cannot grow it
	return out, nil
}

// offer rebuilds the offered tools from the last listing, keeping the old
// slice when nothing changed.
func (st *toolState) offer() {
	var offered []tool.Tool
	clear(st.current)
	for _, rt := range st.listed {
		if st.held[rt.remote] != nil {
			continue
		}
		offered = append(offered, rt)
		st.current[rt.remote] = rt
	}
	if len(offered) == len(st.offered) {
		same := true
		for i := range offered {
			if offered[i] != st.offered[i] {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	st.offered = offered
}

// Changed returns the tools held back because they changed on the server
// since they were accepted, in the server's order.
func (s *Set) Changed() []Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Change
	for _, rt := range s.st.listed {
		h := s.st.held[rt.remote]
		if h == nil {
			continue
		}
		acc := s.st.accepted[rt.remote]
		out = append(out, Change{
			Name: h.spec.Name, Tool: h.remote,
			Description: h.spec.Description, OldDescription: acc.spec.Description,
			Schema: h.spec.Parameters, OldSchema: acc.spec.Parameters,
			Risk: h.risk, OldRisk: acc.risk,
			Fingerprint: h.fp,
		})
	}
	return out
}

// Accept offers a changed tool again, in the version c describes, from
// the next Tools on. It returns ErrNoChange when that version is not the
// one held back (the server changed the tool again, or nothing is held).
func (s *Set) Accept(c Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	h := s.st.held[c.Tool]
	if h == nil || h.fp != c.Fingerprint || h.spec.Name != c.Name {
		return fmt.Errorf("%w: %q", ErrNoChange, c.Name)
	}
	s.st.accepted[c.Tool] = h
	delete(s.st.held, c.Tool)
	s.st.offer()
	s.log.Info("mcptool: the host accepted a changed tool", "tool", c.Tool, "name", c.Name)
	return nil
}

// Refused returns the tools of the last listing that are not offered
// (a name that cannot be made valid or collides with another, a
// malformed input schema), each with its reason.
func (s *Set) Refused() []Refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Refusal(nil), s.st.refused...)
}

// check reports why rt may not be called now: it was held back, or is
// no longer what the server offers under its name.
func (s *Set) check(rt *remoteTool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.st.held[rt.remote] != nil {
		return fmt.Errorf("%w: %q", ErrHeldBack, rt.spec.Name)
	}
	if s.st.current[rt.remote] != rt {
		return fmt.Errorf("%w: %q is no longer offered by MCP server %q in this version", ErrUnavailable, rt.spec.Name, s.server.Name)
	}
	return nil
}
