from podium_client.upload import main

raise SystemExit(main())
