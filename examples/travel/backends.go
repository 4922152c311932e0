package main

// The services the tools call. Real ones would call a flights API, a
// weather API and a mail server; these answer from canned, made-up data,
// the same for every run, after a short pretend network delay.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// FlightSearcher finds flights (search_flights calls it).
type FlightSearcher interface {
	Search(ctx context.Context, q FlightQuery) ([]Flight, error)
}

// Forecaster forecasts the weather (get_weather calls it).
type Forecaster interface {
	Forecast(ctx context.Context, city string, day time.Time) (Forecast, error)
}

// Mailer sends email (send_email calls it) and returns the message ID.
type Mailer interface {
	Send(ctx context.Context, m Email) (string, error)
}

// backends are the services of one process.
type backends struct {
	Flights FlightSearcher
	Weather Forecaster
	Outbox  *Outbox
}

// fakeBackends returns the canned services; now is the clock the weather
// counts "days ahead" on.
func fakeBackends(now func() time.Time) *backends {
	return &backends{
		Flights: &FakeFlights{Latency: 150 * time.Millisecond},
		Weather: &FakeWeather{Latency: 100 * time.Millisecond, Now: now},
		Outbox:  &Outbox{},
	}
}

// ---------------------------------------------------------------- flights

// FlightQuery is one search.
type FlightQuery struct {
	From, To   string // IATA airport or city codes
	Date       time.Time
	Passengers int
}

// Flight is one option, with local times at each end.
type Flight struct {
	Airline  string `json:"airline"`
	Flight   string `json:"flight"`
	From     string `json:"from"`
	To       string `json:"to"`
	Departs  string `json:"departs"` // "2026-06-12 08:15 PDT"
	Arrives  string `json:"arrives"`
	Duration string `json:"duration"` // "5h37m"
	Stops    int    `json:"stops"`
	PriceUSD int    `json:"price_usd"` // for all passengers
}

// place is an airport or a city code.
type place struct {
	city     string
	zone     string
	airports []string // of a city code: NYC is JFK, EWR and LGA
}

var places = map[string]place{
	"SFO": {"San Francisco", "America/Los_Angeles", nil},
	"NYC": {"New York", "America/New_York", []string{"JFK", "EWR", "LGA"}},
	"JFK": {"New York", "America/New_York", nil},
	"EWR": {"New York", "America/New_York", nil},
	"LGA": {"New York", "America/New_York", nil},
}

// schedule is a daily flight.
type schedule struct {
	airline, flight, from, to string
	departs                   string // local time at from
	duration                  time.Duration
	price                     int // one passenger, USD
}

// timetable holds the daily flights between airports.
var timetable = []schedule{
	{"United", "UA 1532", "SFO", "EWR", "07:00", 5*time.Hour + 29*time.Minute, 289},
	{"JetBlue", "B6 616", "SFO", "JFK", "08:15", 5*time.Hour + 37*time.Minute, 254},
	{"American", "AA 2384", "SFO", "JFK", "11:05", 5*time.Hour + 35*time.Minute, 312},
	{"Delta", "DL 2712", "SFO", "JFK", "13:20", 5*time.Hour + 39*time.Minute, 278},
	{"United", "UA 2295", "EWR", "SFO", "08:00", 6*time.Hour + 35*time.Minute, 301},
	{"JetBlue", "B6 915", "JFK", "SFO", "17:45", 6*time.Hour + 40*time.Minute, 263},
	{"Delta", "DL 1380", "JFK", "SFO", "19:30", 6*time.Hour + 42*time.Minute, 284},
}

// FakeFlights searches the timetable.
type FakeFlights struct {
	Latency time.Duration
}

func (f *FakeFlights) Search(ctx context.Context, q FlightQuery) ([]Flight, error) {
	if err := pretendNetwork(ctx, f.Latency); err != nil {
		return nil, err
	}
	from, to := airportsOf(q.From), airportsOf(q.To)
	if from == nil || to == nil {
		return nil, fmt.Errorf("unknown airport in %s→%s; the demo knows %s", q.From, q.To, strings.Join(knownPlaces(), ", "))
	}
	var out []Flight
	for _, s := range timetable {
		if !slices.Contains(from, s.from) || !slices.Contains(to, s.to) {
			continue
		}
		dep, _ := time.Parse("15:04", s.departs)
		departs := time.Date(q.Date.Year(), q.Date.Month(), q.Date.Day(), dep.Hour(), dep.Minute(), 0, 0, mustLoad(places[s.from].zone))
		arrives := departs.Add(s.duration).In(mustLoad(places[s.to].zone))
		out = append(out, Flight{
			Airline: s.airline, Flight: s.flight, From: s.from, To: s.to,
			Departs:  departs.Format("2006-01-02 15:04 MST"),
			Arrives:  arrives.Format("2006-01-02 15:04 MST"),
			Duration: strings.TrimSuffix(s.duration.String(), "0s"),
			PriceUSD: s.price * q.Passengers,
		})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no flights %s→%s in the demo's timetable; try SFO→NYC or NYC→SFO", q.From, q.To)
	}
	slices.SortStableFunc(out, func(a, b Flight) int { return a.PriceUSD - b.PriceUSD })
	return out, nil
}

func airportsOf(code string) []string {
	p, ok := places[code]
	if !ok {
		return nil
	}
	if p.airports != nil {
		return p.airports
	}
	return []string{code}
}

func knownPlaces() []string {
	var codes []string
	for c := range places {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// ---------------------------------------------------------------- weather

// Forecast is get_weather's answer.
type Forecast struct {
	City       string `json:"city"`
	Date       string `json:"date"`
	Conditions string `json:"conditions"`
	HighC      int    `json:"high_c"`
	LowC       int    `json:"low_c"`
	HighF      int    `json:"high_f"`
	LowF       int    `json:"low_f"`
	RainChance int    `json:"rain_chance_pct"`
}

// day is one canned forecast.
type day struct {
	conditions string
	high, low  int // °C
	rain       int // %
}

// climate holds a week of weather per city, indexed by weekday (Sunday
// first): the same forecast for every week.
var climate = map[string]struct {
	zone string
	week [7]day
}{
	"New York": {"America/New_York", [7]day{
		{"sunny", 27, 19, 5}, {"humid, thunderstorms late", 29, 21, 60}, {"cloudy", 24, 18, 30}, {"light rain", 22, 17, 70},
		{"sunny", 25, 17, 5}, {"partly cloudy", 26, 18, 20}, {"sunny", 28, 20, 10},
	}},
	"San Francisco": {"America/Los_Angeles", [7]day{
		{"fog, then sun", 19, 12, 5}, {"fog", 17, 12, 10}, {"sunny", 21, 13, 0}, {"windy", 18, 11, 5},
		{"fog, then sun", 19, 12, 5}, {"sunny", 22, 13, 0}, {"partly cloudy", 20, 12, 5},
	}},
}

// FakeWeather answers from climate, for today and the next 10 days in the
// city's time zone.
type FakeWeather struct {
	Latency time.Duration
	Now     func() time.Time
}

func (f *FakeWeather) Forecast(ctx context.Context, city string, date time.Time) (Forecast, error) {
	if err := pretendNetwork(ctx, f.Latency); err != nil {
		return Forecast{}, err
	}
	name, ok := findCity(city)
	if !ok {
		return Forecast{}, fmt.Errorf("no forecast for %q; the demo knows New York and San Francisco", city)
	}
	c := climate[name]
	today := f.Now().In(mustLoad(c.zone)).Format(time.DateOnly)
	last := f.Now().In(mustLoad(c.zone)).AddDate(0, 0, 10).Format(time.DateOnly)
	if day := date.Format(time.DateOnly); day < today || day > last {
		return Forecast{}, fmt.Errorf("no forecast for %s: forecasts cover %s to %s in %s", day, today, last, name)
	}
	d := c.week[date.Weekday()]
	return Forecast{
		City: name, Date: date.Format(time.DateOnly), Conditions: d.conditions,
		HighC: d.high, LowC: d.low, HighF: fahrenheit(d.high), LowF: fahrenheit(d.low), RainChance: d.rain,
	}, nil
}

func findCity(name string) (string, bool) {
	name = strings.TrimSpace(name)
	if strings.EqualFold(name, "NYC") || strings.EqualFold(name, "New York City") {
		return "New York", true
	}
	for c := range climate {
		if strings.EqualFold(c, name) {
			return c, true
		}
	}
	return "", false
}

func fahrenheit(c int) int { return (c*9+2)/5 + 32 }

// ---------------------------------------------------------------- email

// Email is one message.
type Email struct {
	ID                      string
	From, To, Subject, Body string
}

// Outbox is a fake mail server: it keeps what it is asked to send.
type Outbox struct {
	mu   sync.Mutex
	sent []Email
}

func (o *Outbox) Send(ctx context.Context, m Email) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m.ID = fmt.Sprintf("msg_%04d", len(o.sent)+1)
	o.sent = append(o.sent, m)
	return m.ID, nil
}

// Sent returns the emails sent so far, oldest first.
func (o *Outbox) Sent() []Email {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.sent)
}

// pretendNetwork waits like a network call, and gives up when ctx ends.
func pretendNetwork(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
