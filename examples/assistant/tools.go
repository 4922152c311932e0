package main

// The assistant's tools, written the way you would write real ones: a
// typed input struct whose json and jsonschema tags become the schema the
// model sees (and that valet validates the model's arguments against before
// the function runs), a ctx that is honoured, and tool.ExecContextFrom for
// the tenant, the call id, the logger and the tenant's credentials.
//
// Only the data is fake: a small weather table, a canned search index, a
// calendar, and a latency that stands in for the network.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/tool"
)

// fakeLatency stands in for the round trip to a real API. It shows up in
// the tool-call durations, and the two weather calls of one turn overlap.
const fakeLatency = 40 * time.Millisecond

// tools returns the assistant's tools. cal is the calendar service
// calendar_today calls; nil is fakeCalendar.
func tools(cal calendarAPI) []tool.Tool {
	if cal == nil {
		cal = fakeCalendar
	}
	return []tool.Tool{weatherTool(), searchTool(), calculatorTool(), calendarTool(cal)}
}

// ---------------------------------------------------------------- weather

// WeatherIn is what the model must send to get_weather. City has no
// omitempty, so it is required; Days is optional and must be 1 to 7.
type WeatherIn struct {
	City string `json:"city" jsonschema:"description=City name such as Paris or New York,minLength=1"`
	Days int    `json:"days,omitempty" jsonschema:"description=Number of days to forecast starting today (default 1),minimum=1,maximum=7"`
}

// Forecast is get_weather's answer; the model reads it as JSON.
type Forecast struct {
	City  string        `json:"city"`
	Units string        `json:"units"`
	Days  []DayForecast `json:"days"`
}

// DayForecast is the weather of one day.
type DayForecast struct {
	Day        string `json:"day"` // "today", "tomorrow", "day 3", ...
	Conditions string `json:"conditions"`
	HighC      int    `json:"high_c"`
	LowC       int    `json:"low_c"`
	RainChance int    `json:"rain_chance_percent"`
}

// climate is the fake weather of one city: base temperatures and a week of
// conditions.
type climate struct {
	name          string
	high, low     int
	week          [7]string
	swing, offset int
}

// weatherTable is the whole fake weather service.
var weatherTable = []climate{
	{name: "Paris", high: 19, low: 11, week: [7]string{"partly cloudy", "light rain", "sunny", "cloudy", "showers", "sunny", "partly cloudy"}},
	{name: "Rome", high: 24, low: 14, week: [7]string{"sunny", "sunny", "showers", "partly cloudy", "sunny", "thunderstorms", "sunny"}, offset: 2},
	{name: "London", high: 16, low: 9, week: [7]string{"cloudy", "rain", "light rain", "partly cloudy", "cloudy", "showers", "sunny"}, offset: 4},
	{name: "Berlin", high: 17, low: 8, week: [7]string{"partly cloudy", "sunny", "sunny", "cloudy", "rain", "cloudy", "partly cloudy"}, offset: 1},
	{name: "Lisbon", high: 23, low: 15, week: [7]string{"sunny", "sunny", "partly cloudy", "sunny", "sunny", "cloudy", "sunny"}, offset: 3},
	{name: "New York", high: 21, low: 13, week: [7]string{"sunny", "thunderstorms", "partly cloudy", "sunny", "rain", "sunny", "cloudy"}, offset: 5},
	{name: "Tokyo", high: 22, low: 16, week: [7]string{"rain", "cloudy", "partly cloudy", "sunny", "sunny", "showers", "cloudy"}, offset: 6},
}

var rainChance = map[string]int{
	"sunny": 5, "partly cloudy": 15, "cloudy": 30, "showers": 60,
	"light rain": 70, "rain": 85, "thunderstorms": 80,
}

// swing makes the temperatures of consecutive days differ a little.
var swing = [7]int{0, -2, 1, 2, -1, 0, 1}

// findCity looks a city up in the table, ignoring case and spaces around it.
func findCity(name string) (climate, bool) {
	name = strings.TrimSpace(name)
	for _, c := range weatherTable {
		if strings.EqualFold(c.name, name) {
			return c, true
		}
	}
	return climate{}, false
}

func cityNames() []string {
	names := make([]string, len(weatherTable))
	for i, c := range weatherTable {
		names[i] = c.name
	}
	return names
}

func weatherTool() tool.Tool {
	return tool.New("get_weather",
		"Weather forecast for a city: conditions, temperatures in °C and chance of rain, for today and up to 6 more days.",
		func(ctx context.Context, in WeatherIn) (Forecast, error) {
			ec := tool.ExecContextFrom(ctx)
			ec.Logger.DebugContext(ctx, "get_weather", "tenant", ec.TenantID, "call", ec.CallID, "city", in.City, "days", in.Days)

			if err := pretendNetwork(ctx); err != nil {
				return Forecast{}, err
			}
			c, ok := findCity(in.City)
			if !ok {
				// An error the model can act on: it says what would work.
				return Forecast{}, fmt.Errorf("no weather data for %q; known cities: %s", in.City, strings.Join(cityNames(), ", "))
			}
			days := max(in.Days, 1) // the schema already rejected anything outside 1..7
			f := Forecast{City: c.name, Units: "celsius", Days: make([]DayForecast, days)}
			for d := range days {
				cond := c.week[d]
				delta := swing[(d+c.offset)%len(swing)]
				f.Days[d] = DayForecast{
					Day:        dayLabel(d),
					Conditions: cond,
					HighC:      c.high + delta,
					LowC:       c.low + delta/2,
					RainChance: rainChance[cond],
				}
			}
			return f, nil
		},
		tool.WithTimeout(5*time.Second),
	)
}

func dayLabel(d int) string {
	switch d {
	case 0:
		return "today"
	case 1:
		return "tomorrow"
	}
	return "day " + strconv.Itoa(d+1)
}

// ---------------------------------------------------------------- web search

// SearchIn is what the model must send to web_search.
type SearchIn struct {
	Query string `json:"query" jsonschema:"description=What to search for,minLength=2,maxLength=200"`
	Limit int    `json:"limit,omitempty" jsonschema:"description=How many results to return (default 3),minimum=1,maximum=10"`
}

// SearchResults is web_search's answer. A struct: valet encodes it as JSON
// for the model.
type SearchResults struct {
	Query   string         `json:"query"`
	Results []SearchResult `json:"results"`
}

// SearchResult is one hit.
type SearchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// searchIndex is the canned web. The places and pages are made up.
var searchIndex = []struct {
	SearchResult
	keywords string
}{
	{SearchResult{"Trattoria del Portico, by the Pantheon",
		"https://example.com/rome/trattoria-del-portico",
		"Roman classics two minutes from the Pantheon. Cacio e pepe, carbonara, saltimbocca; open daily 12:00–15:00 and 19:00–23:00; book for dinner."},
		"rome trattoria pantheon restaurant dinner lunch food roman"},
	{SearchResult{"Osteria della Minerva, behind the Pantheon",
		"https://example.com/rome/osteria-della-minerva",
		"Family-run, fair prices: handmade pasta, mains from €14. Closed Mondays."},
		"rome osteria trattoria pantheon restaurant dinner cheap food"},
	{SearchResult{"Rome in 3 days: a walking itinerary",
		"https://example.com/guides/rome-3-days",
		"Day 1 Colosseum and Forum, day 2 Vatican and Trastevere, day 3 Pantheon, Trevi and Villa Borghese."},
		"rome itinerary walk walking guide travel days pantheon colosseum"},
	{SearchResult{"The best bakeries in the Marais, Paris",
		"https://example.com/paris/marais-bakeries",
		"Croissants, babka and the city's best baguette tradition, within ten minutes of each other."},
		"paris bakery bakeries croissant marais food breakfast"},
	{SearchResult{"Night train from Paris to Rome: what to know",
		"https://example.com/trains/paris-rome-night-train",
		"Couchettes from €79, about 15 hours; change in Milan on most nights."},
		"paris rome train night travel ticket"},
	{SearchResult{"valet — a Go SDK for ReAct assistants",
		"https://github.com/valetkit/valet",
		"Tools from typed Go functions, a streaming ReAct loop, approvals, memory and triggers."},
		"valet go golang sdk react agent assistant llm tools"},
}

func searchTool() tool.Tool {
	return tool.New("web_search",
		"Search the web. Returns titles, URLs and snippets of the best matching pages.",
		func(ctx context.Context, in SearchIn) (SearchResults, error) {
			ec := tool.ExecContextFrom(ctx)
			ec.Logger.DebugContext(ctx, "web_search", "tenant", ec.TenantID, "call", ec.CallID, "query", in.Query)

			if err := pretendNetwork(ctx); err != nil {
				return SearchResults{}, err
			}
			limit := in.Limit
			if limit == 0 {
				limit = 3
			}
			return SearchResults{Query: in.Query, Results: search(in.Query, limit)}, nil
		},
		tool.WithTimeout(10*time.Second),
	)
}

// search ranks the canned pages by how many words of the query their
// keywords contain.
func search(query string, limit int) []SearchResult {
	type hit struct {
		r     SearchResult
		score int
	}
	var hits []hit
	words := strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	})
	for _, page := range searchIndex {
		score := 0
		for _, w := range words {
			if len(w) > 2 && strings.Contains(page.keywords, w) {
				score++
			}
		}
		if score > 0 {
			hits = append(hits, hit{page.SearchResult, score})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return b.score - a.score })
	out := []SearchResult{} // [] rather than null for "nothing found"
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, h.r)
	}
	return out
}

// ---------------------------------------------------------------- calculator

// CalcIn is what the model must send to calculator.
type CalcIn struct {
	Expression string `json:"expression" jsonschema:"description=Arithmetic with numbers and + - * / and parentheses such as (3 * 120 + 45) / 2,minLength=1,maxLength=200"`
}

// CalcResult is calculator's answer.
type CalcResult struct {
	Expression string  `json:"expression"`
	Result     float64 `json:"result"`
}

func calculatorTool() tool.Tool {
	return tool.New("calculator",
		"Evaluate an arithmetic expression exactly. Use it for every calculation instead of doing arithmetic yourself.",
		func(ctx context.Context, in CalcIn) (CalcResult, error) {
			ec := tool.ExecContextFrom(ctx)
			ec.Logger.DebugContext(ctx, "calculator", "tenant", ec.TenantID, "call", ec.CallID, "expression", in.Expression)

			v, err := evaluate(in.Expression)
			if err != nil {
				return CalcResult{}, err // the model sees: tool "calculator" failed: division by zero
			}
			return CalcResult{Expression: in.Expression, Result: v}, nil
		},
	)
}

// errDivisionByZero is returned by evaluate for x / 0.
var errDivisionByZero = errors.New("division by zero")

// evaluate computes an arithmetic expression of decimal numbers with
// + - * /, unary minus and parentheses, with the usual precedence:
//
//	expr   = term { ("+" | "-") term }
//	term   = factor { ("*" | "/") factor }
//	factor = ("+" | "-") factor | number | "(" expr ")"
func evaluate(expr string) (float64, error) {
	p := parser{s: expr}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	p.space()
	if p.i < len(p.s) {
		return 0, p.errorf("unexpected %q", p.next())
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errors.New("the result is too large")
	}
	return v, nil
}

type parser struct {
	s     string
	i     int
	depth int
}

// maxDepth bounds nesting, so that "((((...))))" cannot exhaust the stack.
const maxDepth = 100

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%s at position %d", fmt.Sprintf(format, args...), p.i+1)
}

func (p *parser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// next returns the next character (not byte) for error messages.
func (p *parser) next() string {
	_, n := utf8.DecodeRuneInString(p.s[p.i:])
	return p.s[p.i : p.i+n]
}

// peek returns the next non-space byte, or 0 at the end.
func (p *parser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) expr() (float64, error) {
	v, err := p.term()
	for err == nil {
		op := p.peek()
		if op != '+' && op != '-' {
			return v, nil
		}
		p.i++
		var w float64
		if w, err = p.term(); err == nil {
			if op == '+' {
				v += w
			} else {
				v -= w
			}
		}
	}
	return 0, err
}

func (p *parser) term() (float64, error) {
	v, err := p.factor()
	for err == nil {
		op := p.peek()
		if op != '*' && op != '/' {
			return v, nil
		}
		p.i++
		var w float64
		if w, err = p.factor(); err == nil {
			switch {
			case op == '*':
				v *= w
			case w == 0:
				return 0, errDivisionByZero
			default:
				v /= w
			}
		}
	}
	return 0, err
}

func (p *parser) factor() (float64, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return 0, p.errorf("expression nested too deeply")
	}
	switch c := p.peek(); {
	case c == 0:
		return 0, p.errorf("expression ends too early")
	case c == '+' || c == '-':
		p.i++
		v, err := p.factor()
		if c == '-' {
			v = -v
		}
		return v, err
	case c == '(':
		p.i++
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, p.errorf("missing )")
		}
		p.i++
		return v, nil
	case '0' <= c && c <= '9' || c == '.':
		start := p.i
		for p.i < len(p.s) && ('0' <= p.s[p.i] && p.s[p.i] <= '9' || p.s[p.i] == '.') {
			p.i++
		}
		num := p.s[start:p.i]
		v, err := strconv.ParseFloat(num, 64)
		if errors.Is(err, strconv.ErrRange) {
			return 0, errors.New("a number is too large")
		}
		if err != nil {
			p.i = start
			return 0, p.errorf("bad number %q", num)
		}
		return v, nil
	default:
		return 0, p.errorf("unexpected %q", p.next())
	}
}

// ---------------------------------------------------------------- calendar

// CalendarIn is what the model sends to calendar_today: nothing.
type CalendarIn struct{}

// CalendarDay is calendar_today's answer. When the user has not connected
// a Google account, Connected is false and Note says what to do: that is
// an answer for the model to relay, not a failure.
type CalendarDay struct {
	Connected bool      `json:"connected"`
	Note      string    `json:"note,omitempty"`
	Meetings  []Meeting `json:"meetings,omitempty"`
}

// Meeting is one event of the day.
type Meeting struct {
	Start string `json:"start"` // "10:00", in the user's time zone
	End   string `json:"end"`
	Title string `json:"title"`
	With  string `json:"with,omitempty"`
	Where string `json:"where,omitempty"`
}

// notConnected is what calendar_today answers until the user connects a
// Google account.
const notConnected = "The user has not connected a Google account yet: ask them to connect it (in this demo: type /connect google <token>)"

// googleToken is the "google" credential as calendar_today reads it: the
// JSON object the host saved (see hostCommand). A real app would also keep
// the refresh token and the expiry, and refresh through
// credentials.Updater.
type googleToken struct {
	AccessToken string `json:"access_token"`
}

// calendarAPI is the calendar service: it authenticates with the access
// token and returns today's meetings.
type calendarAPI func(ctx context.Context, accessToken string) ([]Meeting, error)

func calendarTool(cal calendarAPI) tool.Tool {
	return tool.New("calendar_today",
		"Today's meetings in the user's Google Calendar: start and end times, titles, people and places.",
		func(ctx context.Context, _ CalendarIn) (CalendarDay, error) {
			ec := tool.ExecContextFrom(ctx)
			ec.Logger.DebugContext(ctx, "calendar_today", "tenant", ec.TenantID, "call", ec.CallID)

			if ec.Credentials == nil {
				return CalendarDay{}, errors.New("no credential store is configured (agent.Config.Credentials)")
			}
			// ec.Credentials is bound to this message's tenant: no other
			// tenant's token can be read through it.
			secret, err := ec.Credentials.Get(ctx, ec.TenantID, "google", "")
			if errors.Is(err, credentials.ErrNotFound) {
				return CalendarDay{Connected: false, Note: notConnected}, nil
			}
			if err != nil {
				return CalendarDay{}, fmt.Errorf("reading the Google credential: %w", err) // never holds the secret
			}
			var tok googleToken
			if err := secret.Decode(&tok); err != nil || tok.AccessToken == "" {
				return CalendarDay{}, errors.New("the saved Google credential holds no access token: ask the user to connect again")
			}
			meetings, err := cal(ctx, tok.AccessToken)
			if err != nil {
				return CalendarDay{}, err
			}
			return CalendarDay{Connected: true, Meetings: meetings}, nil
		},
		tool.WithTimeout(10*time.Second),
	)
}

// fakeCalendar stands in for the Google Calendar API. A real one would
// send the token in an Authorization header; this one only checks that
// there is one. Like the real API, it never echoes the token.
func fakeCalendar(ctx context.Context, accessToken string) ([]Meeting, error) {
	if err := pretendNetwork(ctx); err != nil {
		return nil, err
	}
	if accessToken == "" {
		return nil, errors.New("calendar API: 401 unauthenticated")
	}
	return []Meeting{
		{Start: "10:00", End: "10:30", Title: "Team stand-up", With: "Ana, Tom", Where: "video call"},
		{Start: "13:00", End: "14:00", Title: "Lunch", With: "Marco", Where: "Armando al Pantheon"},
		{Start: "16:30", End: "17:00", Title: "Call about the Rome trip", With: "the travel agent"},
	}, nil
}

// pretendNetwork waits like a network call would, and gives up when ctx
// ends (the orchestrator's per-tool timeout, or the user cancelling).
func pretendNetwork(ctx context.Context) error {
	t := time.NewTimer(fakeLatency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
