"""Deploy a Plan through the Azure SDK. The only package that imports the Azure SDK, and lazily."""
