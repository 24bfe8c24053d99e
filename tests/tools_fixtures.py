"""45 realistic tool definitions (one per task an assistant might do) and helpers for the tools tests."""

from __future__ import annotations

from typing import Any, Sequence

_SPECS: list[tuple[str, str, list[str]]] = [
    ("search_flights", "Search for available flights between two airports on a date.", ["origin", "destination", "date"]),
    ("book_flight", "Book a seat on a specific flight for a passenger.", ["flight_id", "passenger_name"]),
    ("cancel_flight_booking", "Cancel an existing flight reservation and request a refund.", ["booking_reference"]),
    ("search_hotels", "Find hotels in a city for given check-in and check-out dates.", ["city", "check_in", "check_out"]),
    ("book_hotel_room", "Reserve a room in a hotel for a number of nights.", ["hotel_id", "room_type", "nights"]),
    ("get_weather_forecast", "Get the weather forecast (temperature, rain, wind) for a city for the coming days.", ["city", "days"]),
    ("get_stock_quote", "Get the latest share price and daily change of a company's stock by ticker symbol.", ["ticker"]),
    ("convert_currency", "Convert an amount of money from one currency to another at current exchange rates.", ["amount", "from_currency", "to_currency"]),
    ("send_email", "Send an email message to a recipient with a subject and a body.", ["to", "subject", "body"]),
    ("read_inbox", "List the most recent emails in the user's inbox.", ["limit"]),
    ("create_calendar_event", "Create a meeting or event in the user's calendar.", ["title", "start", "end", "attendees"]),
    ("delete_calendar_event", "Delete an event from the user's calendar.", ["event_id"]),
    ("translate_text", "Translate a text from one language into another language.", ["text", "target_language"]),
    ("search_web", "Search the web for pages matching a query.", ["query"]),
    ("get_news_headlines", "Get today's top news headlines for a topic or a country.", ["topic"]),
    ("play_music", "Play a song, an album or a playlist on the user's music service.", ["song"]),
    ("set_timer", "Start a countdown timer for a number of minutes.", ["minutes"]),
    ("create_reminder", "Remind the user about something at a given time.", ["text", "time"]),
    ("get_directions", "Get driving, walking or public transit directions between two places.", ["origin", "destination", "mode"]),
    ("order_food_delivery", "Order food from a restaurant to be delivered to an address.", ["restaurant", "items", "address"]),
    ("find_restaurants", "Find restaurants nearby by cuisine and rating.", ["cuisine", "location"]),
    ("get_sports_scores", "Get live scores and results of football, basketball and other games.", ["league"]),
    ("calculate", "Evaluate a mathematical expression.", ["expression"]),
    ("create_invoice", "Create an invoice for a customer with line items.", ["customer", "items"]),
    ("get_account_balance", "Show the balance of the user's bank account.", ["account_id"]),
    ("transfer_money", "Transfer money between two bank accounts.", ["from_account", "to_account", "amount"]),
    ("search_recipes", "Find cooking recipes by ingredients or by dish name.", ["ingredients"]),
    ("track_package", "Track the delivery status of a parcel by its tracking number.", ["tracking_number"]),
    ("create_github_issue", "Open an issue in a GitHub repository.", ["repo", "title", "body"]),
    ("run_sql_query", "Run a read-only SQL query against the analytics database.", ["sql"]),
    ("summarize_document", "Summarize a long PDF or text document.", ["document_url"]),
    ("generate_image", "Generate a picture from a text prompt.", ["prompt"]),
    ("check_grammar", "Check the spelling and grammar of a text.", ["text"]),
    ("book_taxi", "Book a taxi ride to a destination.", ["pickup", "destination"]),
    ("rent_car", "Rent a car at a location for a period.", ["location", "pickup_date", "return_date"]),
    ("get_air_quality", "Get the air quality index and pollution level for a city.", ["city"]),
    ("find_jobs", "Search job openings by title and location.", ["title", "location"]),
    ("get_movie_showtimes", "Find cinema showtimes for a movie.", ["movie", "city"]),
    ("buy_event_tickets", "Buy tickets for concerts, theatre and other events.", ["event", "quantity"]),
    ("get_crypto_price", "Get the current price of a cryptocurrency such as Bitcoin.", ["coin"]),
    ("set_thermostat", "Set the temperature of the home thermostat.", ["temperature"]),
    ("switch_lights", "Turn the smart lights in a room on or off.", ["room", "state"]),
    ("create_todo", "Add a task to the user's to-do list.", ["task"]),
    ("get_horoscope", "Get the daily horoscope for a zodiac sign.", ["sign"]),
    ("define_word", "Look up the definition of a word in the dictionary.", ["word"]),
]

# Clear requests and the one tool each one needs.
CLEAR_QUERIES: list[tuple[str, str]] = [
    ("What will the weather be like in Paris this weekend?", "get_weather_forecast"),
    ("Convert 250 US dollars to euros, please.", "convert_currency"),
    ("Where is my parcel? The tracking number is 1Z999AA10123456784.", "track_package"),
    ("Translate 'good morning, how are you' into Japanese.", "translate_text"),
    ("Find me a flight from Madrid to Berlin next Friday.", "search_flights"),
    ("What is Apple's share price today?", "get_stock_quote"),
]


def tool(name: str, description: str, params: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in params}, "required": list(params)},
        },
    }


def all_tools(n: int = 45) -> list[dict[str, Any]]:
    return [tool(*spec) for spec in _SPECS[:n]]


def names(tools: Sequence[dict[str, Any]] | None) -> list[str]:
    return [t["function"]["name"] for t in tools or []]


class CountingEmbedder:
    """Wraps the proxy's embedder and records every text it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    @property
    def texts(self) -> int:
        return sum(len(c) for c in self.calls)
