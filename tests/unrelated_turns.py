"""Twenty everyday turns that share no topic with one another or with the tests' questions:
the background a retrieval test's evidence must be found among."""

FILLERS = [
    "The weather has been rainy all week long.", "Did you watch the football game on Sunday?",
    "I finally repaired the kitchen sink myself.", "Our team launched the new billing dashboard.",
    "My cat keeps knocking plants off the shelf.", "We tried a new pasta recipe with mushrooms.",
    "The train was delayed again this morning.", "I started reading a novel about pirates.",
    "The gym was crowded so I went running outside.", "Our neighbour is building a wooden fence.",
    "I bought 2 monitors for office desk 417.", "The concert tickets sold out in minutes.",
    "My brother adopted a very energetic puppy.", "We painted the bedroom walls light green.",
    "The museum opens a dinosaur exhibit next spring.", "I need to renew my passport soon enough.",
    "The bakery downtown makes excellent croissants.", "Our garden tomatoes are finally turning red.",
    "I learned to juggle three balls yesterday.", "The printer at work jammed twice today.",
]
