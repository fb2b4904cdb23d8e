"""What the format readers share: messages, dialogue (episode building), records,
jsonstream (streamed JSON), detect (containers and the first record)."""
