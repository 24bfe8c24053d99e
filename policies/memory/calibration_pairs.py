"""Pairs that calibrate an embedder's cosine to a 0-1 relevance (calibrate.py): a request a user
makes, and a memory about the same topic. Pairs of different topics are the unrelated ones.

This is calibration data, not a mechanism: it tells how far apart "about the same thing" and
"about something else" sit for the embedder in use (the shipped embedders put related pairs at a
raw cosine of 0.2-0.55, remote ones elsewhere), so `min_score` means the same whatever the
embedder. The benchmark's labelled set (bench/data/memories) is written separately.
"""

from __future__ import annotations

# (topic, a request, a memory that bears on it)
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("hotel", "Can you find me somewhere to stay in Lisbon next month?", "I prefer boutique hotels to big chains."),
    ("hotel", "Book accommodation near the conference venue.", "My budget for lodging is about 150 euros a night."),
    ("flight", "Search flights from Boston to Denver on Friday.", "I never take overnight flights."),
    ("flight", "What are my options to fly to Tokyo?", "I always sit in an aisle seat on planes."),
    ("food", "Suggest a restaurant for dinner tonight.", "I am vegetarian."),
    ("food", "Give me a recipe for a quick weeknight meal.", "I can't eat gluten."),
    ("food", "Where should we go for lunch near the office?", "I dislike very spicy food."),
    ("language", "Explain how photosynthesis works.", "Please always reply in Spanish."),
    ("style", "Summarize this article for me.", "Keep your answers short, a few bullet points at most."),
    ("code", "Write a function that parses a CSV file.", "I code in Rust and prefer no unsafe blocks."),
    ("code", "Help me debug this failing unit test.", "Our team uses pytest and type hints everywhere."),
    ("money", "Should I put more into my savings account?", "I am saving for a house deposit."),
    ("money", "Recommend a laptop for work.", "I don't want to spend more than 1,000 dollars on electronics."),
    ("fitness", "Plan a workout for this week.", "I have a bad knee, so no running."),
    ("fitness", "How many calories should I eat a day?", "I'm trying to lose about five kilos."),
    ("music", "Make me a playlist for the weekend.", "I love jazz and old soul records."),
    ("schedule", "Set up a meeting with the design team.", "I don't take meetings before 10 am."),
    ("schedule", "When can we have the call with the client?", "I work from Singapore, so use SGT times."),
    ("family", "Ideas for a weekend trip with the family?", "We have two kids, aged 4 and 7."),
    ("pets", "Find a holiday rental for August.", "We always travel with our dog."),
    ("car", "Which rental car should I pick up at the airport?", "I only drive automatic cars."),
    ("car", "Is this car insurance quote any good?", "I drive a 2018 Toyota Corolla."),
    ("reading", "What should I read next?", "My favourite authors are Le Guin and Ishiguro."),
    ("shopping", "Find me a new winter jacket.", "I wear size M and prefer dark colours."),
    ("health", "What painkiller can I take for a headache?", "I am allergic to aspirin."),
    ("home", "How do I keep my apartment warmer in winter?", "I rent a flat in an old building in Glasgow."),
    ("work", "Draft an email to my manager about the deadline.", "I work as a product manager at a fintech startup."),
    ("learning", "Help me practise for my exam.", "I'm studying for the German B2 certificate."),
    ("gifts", "What should I get my sister for her birthday?", "My sister loves gardening and pottery."),
    ("coffee", "Recommend a café to work from.", "I drink my coffee black and need fast wifi."),
    ("movies", "Pick a film for tonight.", "I don't like horror movies."),
    ("news", "Give me today's tech news.", "I'm mainly interested in AI and semiconductors."),
    # the same topic named on both sides, in other words
    ("hotel2", "Find me a hotel in Rome for three nights.", "I like staying in small family-run hotels."),
    ("flight2", "Book a flight to Madrid for Monday.", "I prefer morning flights with no layovers."),
    ("diet2", "What should I cook for dinner tonight?", "I cook mostly plant-based meals at home."),
    ("wine", "Pick a wine to go with the fish.", "I only drink dry white wine."),
    ("train", "How do I get from Paris to Lyon?", "I'd rather take the train than drive."),
    ("gym", "Find a gym near my new flat.", "I go to the gym four times a week."),
    ("tea", "Which tea should I order?", "I love green tea without sugar."),
    ("phone", "Help me choose a new phone.", "I'm an iPhone user and want to stay on iOS."),
    ("bike", "Plan a cycling route for Sunday.", "I ride a road bike and like hilly routes."),
    ("kids2", "Suggest activities for the kids this weekend.", "My children love science museums."),
    ("rent", "Look for apartments to rent in Berlin.", "I need a flat with at least two bedrooms."),
    ("email2", "Write an email to the landlord.", "Keep my emails formal and polite."),
)
