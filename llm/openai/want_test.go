package openai

import "github.com/valetkit/valet/llm"

// wantReplies holds, for every recorded exchange answered with a reply,
// what the client must return. The values were read off the recordings by
// hand-checked script (text concatenated from the deltas, arguments
// canonicalised, empty ids replaced by call_<n>).
var wantReplies = map[string][]*wantReply{
	"azure_parallel_tool_calls_multiturn.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 343, OutputTokens: 666}, Calls: []wantCall{{"call_emQmocGydKuxvESfQopNngdm", "parallel_local_search_one", "{\"query\": \"latest OpenAI model release notes\"}"}, {"call_eNpK9WUYFCX2ZEUPhYCKvdMs", "parallel_local_search_two", "{\"query\": \"latest Anthropic model release notes\"}"}, {"call_Wdtl6jFxGehSUMn5I1O4Mrdx", "parallel_local_search_three", "{\"query\": \"latest Gemini model release notes\"}"}}},
		{Text: "The latest release notes have been published for the OpenAI, Anthropic, and Gemini models, signaling concurrent updates across the leading AI model families. Each set outlines new capabilities and performance improvements, along with changes to APIs, tooling, and deployment guidelines. Users should review the individual notes to understand new features, adjustments to tokenization, latency or throughput, safety and alignment enhancements, pricing or access changes, and any breaking changes or migration steps required to adopt the updated models in existing workflows.", Finish: "stop", Usage: llm.Usage{InputTokens: 467, OutputTokens: 747}, Calls: []wantCall{}},
	},
	"deepseek_reasoning_content_parallel_tool_calls_multiturn.json": {
		{Text: "Let me load the dice rolling capability!", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 563, OutputTokens: 116}, Calls: []wantCall{{"call_00_sXqYgMESDht75NCLLZtt9804", "load_capability", "{\"id\": \"DICE_ROLL\"}"}}},
		{Text: "Let me get your name and roll the die!", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 875, OutputTokens: 79}, Calls: []wantCall{{"call_00_6edlnw3Z1MgeMfey687g8451", "get_player_name", "{}"}, {"call_01_km02sac7sHxNDPATKLZy7705", "roll_dice", "{}"}}},
		{Text: "🎉 **Congratulations, Anne!** You're a winner! 🎉\n\nThe die rolled exactly **4** -- matching your guess perfectly! Lucky you! 🎲", Finish: "stop", Usage: llm.Usage{InputTokens: 976, OutputTokens: 61}, Calls: []wantCall{}},
	},
	"gemini_openai_compat_empty_tool_call_id_multiturn.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 35, OutputTokens: 12}, Calls: []wantCall{{"call_0", "get_current_time", "{}"}}},
		{Text: "The current time is Noon.", Finish: "stop", Usage: llm.Usage{InputTokens: 66, OutputTokens: 6}, Calls: []wantCall{}},
	},
	"groq_error_400_tool_use_failed_multiturn.json": {
		nil, // error: see wantErrors
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 301, OutputTokens: 52}, Calls: []wantCall{{"fc_311ba17b-89f9-48d3-8fd9-7e74a1264855", "get_something_by_name", "{\"name\": \"test\"}"}}},
		{Text: "The first call failed due to missing and extra parameters, as expected. The second call succeeded and returned: \"Something with name: test\".", Finish: "stop", Usage: llm.Usage{InputTokens: 336, OutputTokens: 96}, Calls: []wantCall{}},
	},
	"groq_stream_error_event_then_tool_call_multiturn.json": {
		nil, // error: see wantErrors
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 304, OutputTokens: 49}, Calls: []wantCall{{"fc_bfb39741-3748-4def-9886-a93fc9c64a90", "get_something_by_name", "{\"name\": \"example\"}"}}},
		{Text: "The tool returned the expected result for the valid call.", Finish: "stop", Usage: llm.Usage{InputTokens: 339, OutputTokens: 58}, Calls: []wantCall{}},
	},
	"ollama_cloud_tool_call_empty_content.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 206, OutputTokens: 194}, Calls: []wantCall{{"call_o2vnpxrw", "final_result", "{\"city\": \"Paris\", \"country\": \"France\"}"}}},
	},
	"openai_content_alongside_tool_calls_multiturn.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 117, OutputTokens: 23}, Calls: []wantCall{{"call_k6xSe8DDrNWlYd3qXE33Wpne", "research", "{\"query\": \"soccer news October 16 2023\"}"}}},
		{Text: "After conducting thorough research, I'll hand this over to a specialized summarizer to consolidate yesterday's soccer events accurately for you.", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 174, OutputTokens: 40}, Calls: []wantCall{{"call_DWMUN54cICFrLaJPfjs6e3fv", "transfer_to_summarizer", "{}"}}},
		{Text: "Based on yesterday's soccer events as of October 16, 2023:\n\n1. **UEFA Euro 2024 Qualifiers:** Several matches took place, with notable victories such as England defeating Italy 3-1, securing England's spot in the Euro 2024 tournament. Harry Kane scored a brace for England.\n\n2. **International Friendlies:** Teams like Brazil and Argentina took part in friendly matches. Brazil triumphed over Venezuela 2-0, with goals from Richarlison and Neymar.\n\n3. **Women's International Soccer:** The USWNT played against Germany in a friendly match, which ended in a 2-2 draw. Megan Rapinoe and Alex Morgan scored for the USA.\n\nThese results had significant implications for qualifications and team preparations ahead of major tournaments.", Finish: "stop", Usage: llm.Usage{InputTokens: 151, OutputTokens: 161}, Calls: []wantCall{}},
	},
	"openai_error_400_context_length_exceeded.json": {
		nil, // error: see wantErrors
	},
	"openai_error_401_invalid_api_key.json": {
		nil, // error: see wantErrors
	},
	"openai_error_429_overloaded_server_error.json": {
		nil, // error: see wantErrors
	},
	"openai_error_429_rate_limit_exceeded.json": {
		nil, // error: see wantErrors
	},
	"openai_error_500_server_error.json": {
		nil, // error: see wantErrors
	},
	"openai_multiturn_single_tool_roundtrip.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 94, OutputTokens: 19}, Calls: []wantCall{{"call_sgvhmmuASadOaDtd93TmrUsY", "calculator", "{\"__arg1\": \"15 * 4\"}"}}},
		{Text: "15 multiplied by 4 is 60.", Finish: "stop", Usage: llm.Usage{InputTokens: 115, OutputTokens: 10}, Calls: []wantCall{}},
	},
	"openai_nonstream_parallel_tool_calls_multiturn.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 75, OutputTokens: 51}, Calls: []wantCall{{"call_eqbDFUdPqay2WjsSzZEiAn0U", "get_current_weather", "{\"location\": \"Seattle, WA\"}"}, {"call_tn3sgasg6GaftTdancBYJNJN", "get_current_weather", "{\"location\": \"San Francisco, CA\"}"}}},
		{Text: "Today, the weather in Seattle is 50 degrees and raining, while San Francisco is enjoying 70 degrees and sunny weather.", Finish: "stop", Usage: llm.Usage{InputTokens: 99, OutputTokens: 25}, Calls: []wantCall{}},
	},
	"openai_nonstream_single_tool_call.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 81, OutputTokens: 14}, Calls: []wantCall{{"call_olc8qHf1RDItRqwuEBNjsu3B", "getCurrentWeather", "{\"location\": \"Boston\"}"}}},
	},
	"openai_stream_parallel_tool_calls_usage.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 75, OutputTokens: 51}, Calls: []wantCall{{"call_j7L00WV19wwQCvKOIVZewXZm", "get_current_weather", "{\"location\": \"Seattle, WA\"}"}, {"call_sAIOI3dvcd1YMsEqD8DI3l8B", "get_current_weather", "{\"location\": \"San Francisco, CA\"}"}}},
	},
	"openai_stream_tool_calls_obfuscation_multiturn.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 398, OutputTokens: 10}, Calls: []wantCall{{"call_rI3WKPYvVwlOgCGRjsPP2hEx", "get_country", "{}"}}},
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 417, OutputTokens: 44}, Calls: []wantCall{{"call_NS4iQj14cDFwc0BnrKqDHavt", "get_weather", "{\"city\": \"Mexico City\"}"}, {"call_SkGkkGDvHQEEk0CGbnAh2AQw", "get_product_name", "{}"}}},
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 481, OutputTokens: 49}, Calls: []wantCall{{"call_QcKhHXwXzqOXJUUHJb1TB2V5", "final_result", "{\"answers\": [{\"answer\": \"Mexico City\", \"label\": \"Capital of the country\"}, {\"answer\": \"Sunny\", \"label\": \"Weather in the capital\"}, {\"answer\": \"Pydantic AI\", \"label\": \"Product name\"}]}"}}},
	},
	"openrouter_error_429_integer_code.json": {
		nil, // error: see wantErrors
	},
	"openrouter_gemini_stream_parallel_tool_calls_single_chunk.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 71, OutputTokens: 12}, Calls: []wantCall{{"tool_getCurrentWeather_3lhCz5SSaZG604yaibNB", "getCurrentWeather", "{\"location\": \"Boston, MA\"}"}, {"tool_getCurrentTime_ljJXl2E9hr87YwAgPI1B", "getCurrentTime", "{\"location\": \"Boston, MA\"}"}}},
	},
	"openrouter_stream_inline_error_and_comments.json": {
		nil, // error: see wantErrors
	},
	"vllm_crusoe_tool_call_multiturn.json": {
		{Text: "", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 167, OutputTokens: 37}, Calls: []wantCall{{"chatcmpl-tool-bbb91941bf76335c", "get_weather", "{\"city\": \"Paris\"}"}}},
		{Text: "The weather in Paris is currently **sunny** with a temperature of **25°C**. It's a great day to enjoy the city! ☀️", Finish: "stop", Usage: llm.Usage{InputTokens: 214, OutputTokens: 54}, Calls: []wantCall{}},
	},
	"zai_error_429_string_code_overloaded.json": {
		nil, // error: see wantErrors
	},
}
