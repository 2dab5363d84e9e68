"""HttpLLMCalculator and what it needs: the HTTP payload type and the servable factory."""
